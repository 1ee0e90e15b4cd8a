//! The bridge's process group: whether anything of it is still running.

use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::killpg;
use nix::unistd::Pid;

/// How often the bridge's process group is checked for stragglers after the bridge exited.
pub(super) const GROUP_POLL: Duration = Duration::from_millis(50);

/// True while some process of group `pgid` is running (zombies do not count, see
/// `Bridge::group_alive`).
pub(super) fn group_running(pgid: Pid) -> bool {
    if matches!(killpg_probe(pgid), Err(Errno::ESRCH)) {
        return false;
    }
    running_member(pgid).unwrap_or(true)
}

/// Signal 0 to a process group: only checks that it exists.
fn killpg_probe(pgid: Pid) -> nix::Result<()> {
    if pgid.as_raw() <= 0 {
        return Err(Errno::ESRCH);
    }
    killpg(pgid, None)
}

/// Whether a process of group `pgid` is running (not a zombie), from `/proc/<pid>/stat`;
/// `None` where there is no `/proc` to ask.
fn running_member(pgid: Pid) -> Option<bool> {
    let entries = std::fs::read_dir("/proc").ok()?;
    let pgid = pgid.as_raw().to_string();
    let running = entries.flatten().any(|entry| {
        let is_pid = entry
            .file_name()
            .as_encoded_bytes()
            .iter()
            .all(u8::is_ascii_digit);
        let Some(stat) = is_pid
            .then(|| std::fs::read_to_string(entry.path().join("stat")).ok())
            .flatten()
        else {
            return false;
        };
        // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        let Some((_, fields)) = stat.rsplit_once(')') else {
            return false;
        };
        let mut fields = fields.split_whitespace();
        let (state, pgrp) = (fields.next(), fields.nth(1));
        pgrp == Some(pgid.as_str()) && state != Some("Z")
    });
    Some(running)
}
