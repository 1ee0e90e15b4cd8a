//! The bridge's guard against callbackd's own sudden death.
//!
//! A SIGKILLed, OOM-killed or crashed `callbackd run` cannot stop its bridge, and Linux's
//! parent-death signal can only be set from the child (`prctl` between fork and exec, which
//! needs `unsafe`). So `run` starts a second, tiny process of its own binary,
//! `callbackd watchdog`, whose stdin is a pipe: callbackd holds the only write end (created
//! close-on-exec, so neither the bridge nor a command tool inherits it), and the kernel closes
//! it however callbackd ends. On a clean stop callbackd first writes [`RELEASE`] and the
//! watchdog exits; at end of file without it, callbackd died, and the watchdog stops the
//! bridge's process group the way `run` would have: SIGTERM, then SIGKILL when the stop
//! timeout runs out.
//!
//! The watchdog has its own process group, so a Ctrl-C at the terminal (which reaches
//! callbackd's group) leaves it to callbackd to stop the bridge and then release it.
//!
//! Not covered: a callbackd killed in the microseconds between spawning the bridge and the
//! watchdog; and, in the moment between the bridge's group emptying and the release, a new
//! process group reusing its number (pids are not reused that fast in practice).

use std::io::{self, Read};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{killpg, pthread_sigmask, SigSet, SigmaskHow, Signal};
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;

use super::group::{group_running, GROUP_POLL};

/// The byte that tells the watchdog callbackd stopped the bridge itself.
pub const RELEASE: u8 = b'R';

/// How long a release waits for the watchdog to exit.
const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// A running watchdog, from [`Watchdog::spawn`] until [`Watchdog::release`].
pub struct Watchdog {
    child: tokio::process::Child,
    pipe: Option<tokio::process::ChildStdin>,
}

impl Watchdog {
    /// Starts `callbackd watchdog` for the bridge's process group `pgid`.
    pub fn spawn(pgid: Pid, stop_timeout: Duration) -> io::Result<Watchdog> {
        // argv[0] as callbackd's own, as `ps` shows it.
        let arg0 = std::env::args_os()
            .next()
            .unwrap_or_else(|| "callbackd".into());
        let mut child = tokio::process::Command::new(own_executable())
            .arg0(arg0)
            .arg("watchdog")
            .arg("--pgid")
            .arg(pgid.as_raw().to_string())
            .arg("--stop-timeout-ms")
            .arg(stop_timeout.as_millis().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .process_group(0)
            .spawn()?;
        let pipe = child.stdin.take();
        tracing::debug!(pid = child.id(), "bridge watchdog started");
        Ok(Watchdog { child, pipe })
    }

    /// Tells the watchdog that the bridge's group is stopped, and waits for it to exit.
    pub async fn release(mut self) {
        if let Some(mut pipe) = self.pipe.take() {
            // An error means the watchdog is already gone; the wait below says how.
            let _ = pipe.write_all(&[RELEASE]).await;
        }
        match tokio::time::timeout(RELEASE_WAIT, self.child.wait()).await {
            Ok(Ok(status)) if status.success() => {}
            Ok(Ok(status)) => tracing::warn!(%status, "the bridge watchdog ended abnormally"),
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot wait for the bridge watchdog"),
            Err(_) => {
                tracing::warn!("the bridge watchdog did not exit; killing it");
                let _ = self.child.kill().await;
            }
        }
    }
}

/// This very program: the file it was started from while it is still there (so `ps`, `top`
/// and `pgrep` show the watchdog as `callbackd`), else `/proc/self/exe`, which works even
/// after an upgrade replaced or deleted the file.
fn own_executable() -> PathBuf {
    match std::env::current_exe() {
        Ok(exe) if exe.is_file() => exe,
        _ => PathBuf::from("/proc/self/exe"),
    }
}

/// `callbackd watchdog`: waits for stdin to end; if callbackd did not release it first,
/// stops process group `pgid`.
///
/// SIGINT, SIGTERM and SIGHUP are blocked: a stop signal sent to everything at once (a
/// terminal's hangup, a service manager stopping the whole cgroup) reaches callbackd too,
/// which then stops the bridge and releases the watchdog, or dies, which the watchdog sees.
/// Signals first, words second: stderr may be a pipe that died with callbackd, and nothing
/// written there may stand between the bridge and its SIGTERM.
pub fn watch(pgid: i32, stop_timeout: Duration) -> anyhow::Result<()> {
    anyhow::ensure!(pgid > 1, "--pgid must be a process group id, not {pgid}");
    let mut stop_signals = SigSet::empty();
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        stop_signals.add(sig);
    }
    pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&stop_signals), None)?;
    if released(io::stdin().lock()) {
        return Ok(());
    }
    let pgid = Pid::from_raw(pgid);
    if !group_running(pgid) {
        return Ok(());
    }
    match killpg(pgid, Signal::SIGTERM) {
        Ok(()) => {}
        Err(Errno::ESRCH) => return Ok(()),
        Err(e) => anyhow::bail!("cannot signal process group {pgid}: {e}"),
    }
    say(format_args!(
        "callbackd ended without stopping the bridge; sent SIGTERM to its process group {pgid}"
    ));
    let kill_at = Instant::now() + stop_timeout;
    while group_running(pgid) {
        if Instant::now() >= kill_at {
            let _ = killpg(pgid, Signal::SIGKILL);
            say(format_args!(
                "the bridge did not stop within {stop_timeout:?}; \
                 sent SIGKILL to its process group {pgid}"
            ));
            break;
        }
        std::thread::sleep(GROUP_POLL);
    }
    Ok(())
}

/// One line on stderr, if stderr still takes it.
fn say(what: std::fmt::Arguments<'_>) {
    crate::telemetry::stderr_line(format_args!("callbackd watchdog: {what}"));
}

/// Reads until end of file: true if [`RELEASE`] came first. A read error counts as the end:
/// nothing would ever arrive on that pipe again.
fn released(mut from: impl Read) -> bool {
    let mut buf = [0u8; 64];
    loop {
        match from.read(&mut buf) {
            Ok(0) => return false,
            Ok(n) if buf[..n].contains(&RELEASE) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_release_byte_before_the_end_counts_as_a_release() {
        assert!(released(&b"R"[..]));
        assert!(released(&b"xxR"[..]));
        assert!(!released(&b""[..]));
        assert!(!released(&b"garbage"[..]));
    }

    #[test]
    fn a_group_id_that_would_signal_everything_is_refused() {
        for bad in [-1, 0, 1] {
            assert!(watch(bad, Duration::ZERO).is_err(), "{bad}");
        }
    }
}
