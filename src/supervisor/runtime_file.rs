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
    /// Whether this daemon drives a bridge (`callbackd run`): only such a daemon can start
    /// a turn, so clients prefer it. Absent in files of older daemons: no bridge.
    #[serde(default)]
    pub bridge: bool,
}

impl Runtime {
    /// `pid 123 at http://…/ (bridge of namespace default)`: a daemon as a person tells
    /// it apart from another.
    pub fn describe(&self) -> String {
        let what = if self.bridge {
            format!("bridge of namespace {}", self.namespace)
        } else {
            "no bridge".to_string()
        };
        format!(
            "pid {} at {} ({what}, ready since {})",
            self.pid, self.url, self.started_at
        )
    }
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
        bridge: bool,
    ) -> io::Result<RuntimeFile> {
        let runtime = Runtime {
            url: url.to_string(),
            pid: std::process::id(),
            namespace: namespace.as_str().to_string(),
            started_at: crate::clock::rfc3339_ms(crate::clock::now_ms()),
            console_url,
            bridge,
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

/// The daemon a client picked among the running ones of a data directory.
#[derive(Debug, Clone)]
pub struct Chosen {
    pub path: PathBuf,
    pub runtime: Runtime,
    /// Said on stderr when other daemons run on the same data directory: which one was
    /// taken, why, and the others (a client never silently picks one of several).
    pub note: Option<String>,
}

/// Several daemons equally fit a client: it must be told which (`--url`).
#[derive(Debug, thiserror::Error)]
#[error(
    "{count} daemons run on the data directory {dir}, none preferred (a client prefers the one \
     driving a bridge of its namespace, then any with a bridge): pass --url with one of: {list}",
    count = .candidates.len(),
    list = .candidates.iter().map(Runtime::describe).collect::<Vec<_>>().join("; ")
)]
pub struct Ambiguous {
    pub dir: PathBuf,
    pub candidates: Vec<Runtime>,
}

/// How well a daemon fits a client of namespace `ns`: one driving that namespace's bridge,
/// then one driving any bridge (it can still run turns of every namespace's sessions it
/// drives), then a daemon without a bridge (it reads, but answers writes `501`).
fn fit(r: &Runtime, ns: &Namespace) -> u8 {
    match (r.bridge, r.namespace == ns.as_str()) {
        (true, true) => 2,
        (true, false) => 1,
        (false, _) => 0,
    }
}

/// The running daemon a client of namespace `ns` should talk to: the best fit ([`fit`]);
/// several equally fit ones are [`Ambiguous`], never "the newest".
pub fn find(dir: &Path, ns: &Namespace) -> Result<Option<Chosen>, Ambiguous> {
    let live = live(dir);
    let Some(best) = live.iter().map(|(_, r)| fit(r, ns)).max() else {
        return Ok(None);
    };
    let (top, rest): (Vec<_>, Vec<_>) = live.into_iter().partition(|(_, r)| fit(r, ns) == best);
    if top.len() > 1 {
        return Err(Ambiguous {
            dir: dir.to_path_buf(),
            candidates: top.into_iter().map(|(_, r)| r).collect(),
        });
    }
    let (path, runtime) = top.into_iter().next().expect("the best fit is one of them");
    let note = (!rest.is_empty()).then(|| {
        let others: Vec<String> = rest.iter().map(|(_, r)| r.describe()).collect();
        format!(
            "{} daemons run on this data directory; using {} (pass --url for another: {})",
            rest.len() + 1,
            runtime.describe(),
            others.join("; ")
        )
    });
    Ok(Some(Chosen {
        path,
        runtime,
        note,
    }))
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
            true,
        )
        .unwrap();
        let mode = std::fs::metadata(file.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let chosen = find(dir.path(), &Namespace::default()).unwrap().unwrap();
        assert_eq!(chosen.path, file.path());
        assert_eq!(chosen.runtime.url, "http://127.0.0.1:1/");
        assert_eq!(chosen.runtime.pid, std::process::id());
        assert!(chosen.runtime.bridge);
        assert!(chosen.note.is_none(), "alone: nothing to say");
        drop(file);
        assert!(find(dir.path(), &Namespace::default()).unwrap().is_none());
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
            bridge: true,
        };
        std::fs::write(
            path_for(dir.path(), stale.pid),
            serde_json::to_string(&stale).unwrap(),
        )
        .unwrap();
        assert!(find(dir.path(), &Namespace::default()).unwrap().is_none());
    }

    /// Runtime files of daemons in `dir`, each under its own name but all with this test's
    /// live pid: several daemons as far as the files go.
    fn daemons(dir: &Path, all: &[(&str, &str, bool, &str)]) {
        for (i, (url, ns, bridge, started_at)) in all.iter().enumerate() {
            let r = Runtime {
                url: url.to_string(),
                pid: std::process::id(),
                namespace: ns.to_string(),
                started_at: started_at.to_string(),
                console_url: None,
                bridge: *bridge,
            };
            std::fs::write(
                dir.join(format!("{PREFIX}{i}{SUFFIX}")),
                serde_json::to_string(&r).unwrap(),
            )
            .unwrap();
        }
    }

    fn url_for(dir: &Path, ns: &str) -> Result<String, Ambiguous> {
        find(dir, &Namespace::new(ns)).map(|c| c.unwrap().runtime.url)
    }

    #[test]
    fn a_daemon_with_a_bridge_wins_over_a_newer_one_without_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        daemons(
            dir.path(),
            &[
                (
                    "http://127.0.0.1:3/",
                    "default",
                    true,
                    "2026-01-01T00:00:00.000Z",
                ),
                (
                    "http://127.0.0.1:4/",
                    "default",
                    false,
                    "2026-01-02T00:00:00.000Z",
                ),
            ],
        );
        let chosen = find(dir.path(), &Namespace::default()).unwrap().unwrap();
        assert_eq!(chosen.runtime.url, "http://127.0.0.1:3/");
        let note = chosen.note.unwrap();
        assert!(
            note.starts_with("2 daemons run on this data directory; using pid"),
            "{note}"
        );
        assert!(
            note.contains("http://127.0.0.1:3/ (bridge of namespace default"),
            "{note}"
        );
        assert!(note.contains("http://127.0.0.1:4/ (no bridge"), "{note}");
    }

    #[test]
    fn the_bridge_of_the_asked_namespace_is_preferred_then_any_bridge() {
        let dir = tempfile::tempdir().unwrap();
        daemons(
            dir.path(),
            &[
                ("http://127.0.0.1:3/", "a", true, "2026-01-01T00:00:00.000Z"),
                (
                    "http://127.0.0.1:4/",
                    "default",
                    true,
                    "2026-01-02T00:00:00.000Z",
                ),
                (
                    "http://127.0.0.1:5/",
                    "default",
                    false,
                    "2026-01-03T00:00:00.000Z",
                ),
            ],
        );
        assert_eq!(url_for(dir.path(), "a").unwrap(), "http://127.0.0.1:3/");
        assert_eq!(
            url_for(dir.path(), "default").unwrap(),
            "http://127.0.0.1:4/"
        );
        // Two bridges, neither of namespace zzz: equally fit, so the client must be told.
        let e = url_for(dir.path(), "zzz").unwrap_err();
        assert_eq!(e.candidates.len(), 2);
        let text = e.to_string();
        assert!(text.contains("pass --url with one of:"), "{text}");
        assert!(text.contains("http://127.0.0.1:3/") && text.contains("http://127.0.0.1:4/"));
    }

    #[test]
    fn two_daemons_without_a_bridge_are_not_chosen_between_silently() {
        let dir = tempfile::tempdir().unwrap();
        daemons(
            dir.path(),
            &[
                (
                    "http://127.0.0.1:3/",
                    "default",
                    false,
                    "2026-01-01T00:00:00.000Z",
                ),
                (
                    "http://127.0.0.1:4/",
                    "default",
                    false,
                    "2026-01-02T00:00:00.000Z",
                ),
            ],
        );
        assert!(url_for(dir.path(), "default").is_err());
    }

    #[test]
    fn a_file_of_an_older_daemon_without_the_bridge_field_reads_as_no_bridge() {
        let r: Runtime = serde_json::from_str(
            r#"{"url":"http://127.0.0.1:1/","pid":1,"namespace":"default","started_at":"x"}"#,
        )
        .unwrap();
        assert!(!r.bridge);
    }
}
