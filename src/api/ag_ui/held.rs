//! Where each interrupted AG-UI run stopped reading its Cursor run, so the AG-UI run that
//! resumes it continues from there: the events stored while the person decided (a parallel
//! call's result, the held call's own `tool_call` event) are sent by the continuation, and
//! the tool calls already opened are not opened again. Kept in memory: after a daemon
//! restart a resume continues from the run's last stored event.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use crate::store::Namespace;

/// An interrupted run's place.
#[derive(Debug, Clone, Default)]
pub struct Stopped {
    /// The last seq the interrupted AG-UI run mapped.
    pub pos: u64,
    /// The tool calls it opened.
    pub opened: HashSet<String>,
}

/// The places of the interrupted runs, by `(namespace, Cursor run id)`.
#[derive(Default)]
pub struct HeldRuns {
    runs: Mutex<HashMap<(Namespace, String), Stopped>>,
}

impl HeldRuns {
    pub fn stop(&self, ns: &Namespace, run: &str, at: Stopped) {
        self.lock().insert((ns.clone(), run.to_string()), at);
    }

    /// Where the run stopped, forgotten once taken (a run is resumed once per interrupt).
    pub fn take(&self, ns: &Namespace, run: &str) -> Option<Stopped> {
        self.lock().remove(&(ns.clone(), run.to_string()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(Namespace, String), Stopped>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }
}
