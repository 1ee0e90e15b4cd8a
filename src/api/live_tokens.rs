//! [`LiveTokens`]: the text fragments of the assistant message being written, counted per
//! run while a `POST .../messages` stream relays the bridge's deltas, so the
//! `message_snapshot` that replaces them can say how many it replaced (`delta`). The count
//! is sealed once per snapshot seq (the same value for every stream that asks) and
//! recorded beside the event, so a replay sends the same value.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::store::Namespace;

type Key = (Namespace, String);

#[derive(Default)]
struct RunTokens {
    /// Fragments of the open message sent so far.
    open: u32,
    /// Snapshot seq -> the count sealed for it.
    sealed: HashMap<u64, u32>,
}

/// Token counts of the runs whose `Send` is being relayed now.
#[derive(Clone, Default)]
pub struct LiveTokens {
    runs: Arc<Mutex<HashMap<Key, RunTokens>>>,
}

/// Registration of a relayed run; the count goes when it is dropped.
pub struct Relay {
    tokens: LiveTokens,
    key: Key,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.tokens.lock().remove(&self.key);
    }
}

impl Relay {
    /// Counts one fragment sent; returns its number within the open message (from 1).
    pub fn fragment(&self) -> u32 {
        let mut runs = self.tokens.lock();
        let run = runs.entry(self.key.clone()).or_default();
        run.open += 1;
        run.open
    }
}

impl LiveTokens {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, RunTokens>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts counting `run_id`'s fragments.
    pub fn relay(&self, ns: &Namespace, run_id: &str) -> Relay {
        let key = (ns.clone(), run_id.to_string());
        self.lock().entry(key.clone()).or_default();
        Relay {
            tokens: self.clone(),
            key,
        }
    }

    /// The count for the snapshot at `seq`: sealed now (the open count, which restarts at 0)
    /// or earlier; `None` when no relay of this run is live.
    pub fn seal(&self, ns: &Namespace, run_id: &str, seq: u64) -> Option<u32> {
        let mut runs = self.lock();
        let run = runs.get_mut(&(ns.clone(), run_id.to_string()))?;
        if let Some(n) = run.sealed.get(&seq) {
            return Some(*n);
        }
        let n = std::mem::take(&mut run.open);
        run.sealed.insert(seq, n);
        Some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seal_takes_the_open_count_once_per_seq() {
        let live = LiveTokens::default();
        let ns = Namespace::default();
        assert_eq!(live.seal(&ns, "r", 3), None);
        let relay = live.relay(&ns, "r");
        assert_eq!(relay.fragment(), 1);
        assert_eq!(relay.fragment(), 2);
        assert_eq!(live.seal(&ns, "r", 3), Some(2));
        assert_eq!(live.seal(&ns, "r", 3), Some(2));
        assert_eq!(relay.fragment(), 1);
        assert_eq!(live.seal(&ns, "r", 6), Some(1));
        drop(relay);
        assert_eq!(live.seal(&ns, "r", 9), None);
    }
}
