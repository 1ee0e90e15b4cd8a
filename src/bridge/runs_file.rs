//! The runs a supervised bridge is running, kept where a restart finds them.
//!
//! `callbackd run` claims its bridge's runs ([`BridgeRuns::claim`]): from then on each run the
//! bridge starts (a committed `runs.create`/`runs.update` with a status that is not terminal)
//! is written to `callbackd.runs-<pid>.json` in the data directory, and taken out again when
//! the store announces its end (`StoreNotice::RunEnded`, [`BridgeRuns::ended`]), whoever
//! ended it. When the bridge exits, callbackd ends the runs left in it
//! ([`super::RunEnder`]); if callbackd itself dies (kill -9, the OOM killer), the file stays,
//! and the next daemon started on that data directory ends them ([`stale`]): the watchdog has
//! stopped the bridge that ran them.
//!
//! Ownership is the process: a file whose pid is still running belongs to a live daemon and
//! is left alone, so a second daemon on the same PostgreSQL store never ends a run that
//! another live daemon's bridge is running. Daemons on other hosts have other data
//! directories and never see each other's files. Unlike the approvals' lease this needs no
//! waiting: a dead pid is known at once, so a restart ends the runs within its start.
//!
//! `callbackd serve` claims nothing: its bridge is not its child, and may outlive it and go
//! on with its runs against the restarted daemon. A run of such a bridge that nobody can
//! finish is ended by a cancel (`POST /v1/runs/{run_id}/cancel`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::run::RunStatus;
use crate::store::RunDoc;
use crate::store::{Namespace, StoreCall};

const PREFIX: &str = "callbackd.runs-";
const SUFFIX: &str = ".json";

/// What a runs file says.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Claimed {
    pub namespace: String,
    /// Run id -> the id of its session (agent).
    pub runs: BTreeMap<String, String>,
}

struct Claim {
    path: PathBuf,
    ns: Namespace,
    runs: BTreeMap<String, String>,
}

/// The claimed runs of this daemon's supervised bridge (none until [`claim`](Self::claim)).
#[derive(Clone, Default)]
pub struct BridgeRuns {
    inner: Arc<Mutex<Option<Claim>>>,
}

impl BridgeRuns {
    /// From now on, the runs namespace `ns`'s bridge starts are this daemon's, kept in
    /// `dir`'s runs file of this process.
    pub fn claim(&self, dir: &Path, ns: &Namespace) {
        let claim = Claim {
            path: path_for(dir, std::process::id()),
            ns: ns.clone(),
            runs: BTreeMap::new(),
        };
        write(&claim);
        *self.lock() = Some(claim);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Claim>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes a committed store call of namespace `ns`: a run started (its document has a
    /// status that is not terminal). Its end is [`ended`](Self::ended).
    pub fn note(&self, ns: &Namespace, call: &StoreCall) {
        let (StoreCall::RunsCreate(doc) | StoreCall::RunsUpdate(doc)) = call else {
            return;
        };
        let mut guard = self.lock();
        let Some(claim) = guard.as_mut().filter(|c| &c.ns == ns) else {
            return;
        };
        let Some(status) = status_of(doc) else {
            return;
        };
        if status.is_terminal() {
            return;
        }
        let added = claim
            .runs
            .insert(doc.run_id.clone(), doc.agent_id.clone())
            .is_none();
        if added {
            write(claim);
        }
    }

    /// Whether run `run_id` of namespace `ns` is in the file (a cheap check on the caller's
    /// thread, before [`BridgeRuns::ended`] writes the file).
    pub fn holds(&self, ns: &Namespace, run_id: &str) -> bool {
        self.lock()
            .as_ref()
            .is_some_and(|c| &c.ns == ns && c.runs.contains_key(run_id))
    }

    /// Run `run_id` of namespace `ns` ended (the store announced it): out of the file.
    pub fn ended(&self, ns: &Namespace, run_id: &str) {
        let mut guard = self.lock();
        let Some(claim) = guard.as_mut().filter(|c| &c.ns == ns) else {
            return;
        };
        if claim.runs.remove(run_id).is_some() {
            write(claim);
        }
    }

    /// The claimed runs that have not ended, as `(namespace, run id, session id)`.
    pub fn running(&self) -> Vec<(Namespace, String, String)> {
        match self.lock().as_ref() {
            None => Vec::new(),
            Some(c) => c
                .runs
                .iter()
                .map(|(run, agent)| (c.ns.clone(), run.clone(), agent.clone()))
                .collect(),
        }
    }

    /// The bridge is gone and its runs are ended: the file goes (a clean stop).
    pub fn release(&self) {
        if let Some(claim) = self.lock().take() {
            let _ = std::fs::remove_file(&claim.path);
        }
    }
}

fn status_of(doc: &RunDoc) -> Option<RunStatus> {
    let v: serde_json::Value = serde_json::from_str(doc.json.as_str()).ok()?;
    RunStatus::of_doc(&v)
}

/// This process's runs file in `dir`.
fn path_for(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("{PREFIX}{pid}{SUFFIX}"))
}

/// Writes the file whole (a temp file renamed over it): a crash leaves the old or the new.
fn write(claim: &Claim) {
    let body = Claimed {
        namespace: claim.ns.as_str().to_string(),
        runs: claim.runs.clone(),
    };
    let tmp = claim.path.with_extension("json.tmp");
    let result = serde_json::to_vec(&body)
        .map_err(std::io::Error::other)
        .and_then(|json| std::fs::write(&tmp, json))
        .and_then(|()| std::fs::rename(&tmp, &claim.path));
    if let Err(e) = result {
        tracing::warn!(path = %claim.path.display(), error = %e,
            "cannot write the bridge's runs file: if callbackd dies, a restart will not end them");
    }
}

/// The runs files in `dir` of daemons that are gone (their pid runs no more, or is this
/// very process: a container restarts with the same pid), with what they claim.
pub fn stale(dir: &Path) -> Vec<(PathBuf, u32, Claimed)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|n| n.strip_suffix(SUFFIX))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && alive(pid) {
            continue;
        }
        let path = entry.path();
        match std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Claimed>(&b).ok())
        {
            Some(claimed) => out.push((path, pid, claimed)),
            None => {
                tracing::warn!(path = %path.display(), "an unreadable runs file of a daemon that is gone; removed");
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    out
}

/// Whether process `pid` runs (one we may not signal runs too).
fn alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        Err(nix::errno::Errno::ESRCH) => false,
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(run: &str, status: &str) -> StoreCall {
        let doc = serde_json::json!({"runId": run, "agentId": "a1", "status": status});
        StoreCall::parse(
            "runs",
            "update",
            &serde_json::json!({ "run": doc }).to_string(),
        )
        .unwrap()
    }

    #[test]
    fn a_run_is_kept_while_it_runs_and_a_dead_daemons_file_is_stale() {
        let dir = tempfile::tempdir().unwrap();
        let ns = Namespace::default();
        let runs = BridgeRuns::default();
        runs.note(&ns, &update("r0", "running"));
        assert!(runs.running().is_empty(), "nothing is claimed before claim");
        runs.claim(dir.path(), &ns);
        runs.note(&ns, &update("r1", "running"));
        runs.note(&ns, &update("r2", "running"));
        runs.note(&Namespace::new("other"), &update("r3", "running"));
        runs.note(&ns, &update("r2", "finished"));
        assert_eq!(
            runs.running().len(),
            2,
            "an end is the store's notice, not a note"
        );
        runs.ended(&ns, "r2");
        let ids: Vec<String> = runs.running().into_iter().map(|(_, r, _)| r).collect();
        assert_eq!(ids, ["r1"]);
        let file = path_for(dir.path(), std::process::id());
        let on_disk: Claimed = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(on_disk.runs.keys().collect::<Vec<_>>(), ["r1"]);
        // Its own pid's file counts as stale (a restarted container reuses the pid); a
        // live process's does not; a dead one's does.
        assert_eq!(stale(dir.path()).len(), 1);
        let parent = std::os::unix::process::parent_id();
        std::fs::copy(&file, path_for(dir.path(), parent)).unwrap();
        std::fs::copy(&file, path_for(dir.path(), u32::MAX - 1)).unwrap();
        let stale_paths: Vec<PathBuf> = stale(dir.path()).into_iter().map(|(p, ..)| p).collect();
        assert!(!stale_paths.contains(&path_for(dir.path(), parent)));
        assert!(stale_paths.contains(&path_for(dir.path(), u32::MAX - 1)));
        runs.release();
        assert!(!file.exists());
    }
}
