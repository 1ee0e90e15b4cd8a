//! The runtime file a running daemon leaves in its data directory, so that client commands
//! (`sessions`, `runs`, `follow`, `approvals`, ...) find it wherever it listens (`callbackd
//! run` picks a free port) and from any working directory.
//!
//! One file per daemon process, `callbackd.runtime-<pid>.json` next to the database and its
//! tokens file (two `run`s sharing a data directory each leave their own), mode 0600 because
//! it holds the console URL with the API token. It is written once the daemon is ready
//! (`serve`: listening; `run`: the bridge answered and the run API is attached), removed when
//! the daemon stops cleanly, and ignored when its pid is no longer running (after a crash).

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::store::Namespace;

const PREFIX: &str = "callbackd.runtime-";
const SUFFIX: &str = ".json";

/// What a runtime file says.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Runtime {
    /// The daemon's base URL (the `url` of its ready line).
    pub url: String,
    pub pid: u32,
    /// The namespace whose bridge `run` drives (`default` for `serve`).
    pub namespace: String,
    /// When the daemon became ready, RFC 3339.
    pub started_at: String,
    /// The console's URL with the namespace's API token in its fragment, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub console_url: Option<String>,
}

/// The directory runtime files live in: the database's (where the tokens file is too).
pub fn dir_of(db: &Path) -> PathBuf {
    match db.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// This process's runtime file in `dir`.
pub fn path_for(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("{PREFIX}{pid}{SUFFIX}"))
}

/// A written runtime file; dropping it removes the file (a clean stop).
#[derive(Debug)]
pub struct RuntimeFile {
    path: PathBuf,
}

impl RuntimeFile {
    /// Writes this process's runtime file in `dir` (mode 0600, atomically).
    pub fn write(
        dir: &Path,
        url: &str,
        namespace: &Namespace,
        console_url: Option<String>,
    ) -> io::Result<RuntimeFile> {
        let runtime = Runtime {
            url: url.to_string(),
            pid: std::process::id(),
            namespace: namespace.as_str().to_string(),
            started_at: crate::clock::rfc3339_ms(crate::clock::now_ms()),
            console_url,
        };
        let path = path_for(dir, runtime.pid);
        let json = serde_json::to_string(&runtime).map_err(io::Error::other)?;
        super::ready::write_ready_file(&path, &json)?;
        Ok(RuntimeFile { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RuntimeFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Whether process `pid` is running (a zombie or another user's process counts).
fn alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if raw <= 0 {
        return false;
    }
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None) {
        Ok(()) => true,
        Err(e) => e == nix::errno::Errno::EPERM,
    }
}

/// The runtime files of running daemons in `dir`, newest first, each with its path. Files
/// of dead processes and unreadable ones are skipped.
pub fn live(dir: &Path) -> Vec<(PathBuf, Runtime)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(PathBuf, Runtime)> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with(PREFIX) && name.ends_with(SUFFIX)
        })
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.path()).ok()?;
            let runtime: Runtime = serde_json::from_str(&text).ok()?;
            alive(runtime.pid).then(|| (e.path(), runtime))
        })
        .collect();
    found.sort_by(|a, b| b.1.started_at.cmp(&a.1.started_at));
    found
}

/// The running daemon a client of namespace `ns` should talk to: the newest whose bridge is
/// of `ns`, else the newest of any (every daemon serves every namespace's run API).
pub fn find(dir: &Path, ns: &Namespace) -> Option<(PathBuf, Runtime)> {
    let mut live = live(dir);
    let pos = live
        .iter()
        .position(|(_, r)| r.namespace == ns.as_str())
        .unwrap_or(0);
    (!live.is_empty()).then(|| live.swap_remove(pos))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_written_file_is_private_found_and_removed_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let file = RuntimeFile::write(
            dir.path(),
            "http://127.0.0.1:1/",
            &Namespace::default(),
            Some("http://127.0.0.1:1/ui/#token=t".into()),
        )
        .unwrap();
        let mode = std::fs::metadata(file.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let (path, found) = find(dir.path(), &Namespace::default()).unwrap();
        assert_eq!(path, file.path());
        assert_eq!(found.url, "http://127.0.0.1:1/");
        assert_eq!(found.pid, std::process::id());
        drop(file);
        assert!(find(dir.path(), &Namespace::default()).is_none());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_file_whose_process_is_gone_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        // A pid above the kernel's maximum (4194304) never runs.
        let stale = Runtime {
            url: "http://127.0.0.1:2/".into(),
            pid: 4_194_305,
            namespace: "default".into(),
            started_at: "2099-01-01T00:00:00.000Z".into(),
            console_url: None,
        };
        std::fs::write(
            path_for(dir.path(), stale.pid),
            serde_json::to_string(&stale).unwrap(),
        )
        .unwrap();
        assert!(find(dir.path(), &Namespace::default()).is_none());
    }

    #[test]
    fn the_daemon_of_the_asked_namespace_is_preferred() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id();
        let a = Runtime {
            url: "http://127.0.0.1:3/".into(),
            pid: me,
            namespace: "a".into(),
            started_at: "2026-01-01T00:00:00.000Z".into(),
            console_url: None,
        };
        // Same live pid under another name: two daemons as far as the files go.
        let newer = Runtime {
            url: "http://127.0.0.1:4/".into(),
            namespace: "default".into(),
            started_at: "2026-01-02T00:00:00.000Z".into(),
            ..a.clone()
        };
        std::fs::write(
            dir.path().join(format!("{PREFIX}x{SUFFIX}")),
            serde_json::to_string(&a).unwrap(),
        )
        .unwrap();
        std::fs::write(
            path_for(dir.path(), me),
            serde_json::to_string(&newer).unwrap(),
        )
        .unwrap();
        assert_eq!(find(dir.path(), &Namespace::new("a")).unwrap().1.url, a.url);
        assert_eq!(
            find(dir.path(), &Namespace::default()).unwrap().1.url,
            newer.url
        );
        assert_eq!(
            find(dir.path(), &Namespace::new("zzz")).unwrap().1.url,
            newer.url
        );
    }
}
