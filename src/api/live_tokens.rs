//! [`LiveTokens`]: the text fragments of the assistant message being written, counted per
//! run while a `POST .../messages` stream relays the bridge's deltas, so the
//! `message_snapshot` that replaces them can say how many it replaced (`delta`). The count
//! is sealed once per snapshot seq (the same value for every stream that asks) and
//! recorded beside the event, so a replay sends the same value.
//!
//! A fragment is counted when it is received from the bridge, not when the stream sends it:
//! the snapshot can be read (and sealed, by any stream of the run) while fragments of its
//! message still wait in the relay. Each fragment carries the number of the message it was
//! received in (how many seals came before it); the relaying stream sends a fragment only
//! after every snapshot sealed before it, and all of a snapshot's fragments before that
//! snapshot. So a snapshot's `delta` is exactly the number of `token`s of its message the
//! stream sent before it, and no token follows the snapshot that replaced it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::store::Namespace;

type Key = (Namespace, String);

/// Fragments waiting to be sent per run, at most (best effort: more are dropped, uncounted;
/// the snapshot carries the whole text anyway).
const PENDING: usize = 1024;

/// A received fragment, not yet sent.
pub struct Fragment {
    pub text: String,
    /// Its number within its message (from 1).
    pub delta: u32,
    /// How many snapshots were sealed before it was received.
    message: u64,
}

#[derive(Default)]
struct RunTokens {
    /// Fragments of the open message received so far.
    open: u32,
    /// Snapshots sealed so far (the open message's number).
    message: u64,
    /// Snapshot seq -> (the count sealed for it, the number of the message it closed).
    sealed: HashMap<u64, (u32, u64)>,
    pending: VecDeque<Fragment>,
}

/// Token counts of the runs whose `Send` is being relayed now.
#[derive(Clone, Default)]
pub struct LiveTokens {
    runs: Arc<Mutex<HashMap<Key, RunTokens>>>,
}

/// The relaying stream's side of a run's fragments; the count goes when it is dropped.
pub struct Relay {
    tokens: LiveTokens,
    key: Key,
    notify: Arc<Notify>,
    /// Snapshots this stream has written: fragments of later messages wait.
    written: u64,
}

/// The `Send` reader's side: where received fragments go.
pub struct Intake {
    tokens: LiveTokens,
    key: Key,
    notify: Arc<Notify>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.tokens.lock().remove(&self.key);
    }
}

impl Intake {
    /// A fragment received from the bridge: counted in the open message and queued for the
    /// stream. `false` once the stream is gone.
    pub fn push(&self, text: String) -> bool {
        let mut runs = self.tokens.lock();
        let Some(run) = runs.get_mut(&self.key) else {
            return false;
        };
        if run.pending.len() < PENDING {
            run.open += 1;
            let fragment = Fragment {
                text,
                delta: run.open,
                message: run.message,
            };
            run.pending.push_back(fragment);
            self.notify.notify_one();
        }
        true
    }
}

impl Relay {
    /// Resolves when fragments were received (at once if some came since the last call).
    pub async fn received(&self) {
        self.notify.notified().await
    }

    /// The fragments that may be sent now: those of messages whose snapshots this stream
    /// has written, and of the open message after them.
    pub fn sendable(&mut self) -> Vec<Fragment> {
        let mut runs = self.tokens.lock();
        let Some(run) = runs.get_mut(&self.key) else {
            return Vec::new();
        };
        let n = run
            .pending
            .iter()
            .take_while(|f| f.message <= self.written)
            .count();
        run.pending.drain(..n).collect()
    }

    /// Before the durable frame of `seq` is written: the fragments that must precede it
    /// (when it is a snapshot sealed here, those of its message and earlier ones), after
    /// which the stream counts the snapshot as written.
    pub fn before_frame(&mut self, seq: u64) -> Vec<Fragment> {
        let mut runs = self.tokens.lock();
        let Some(run) = runs.get_mut(&self.key) else {
            return Vec::new();
        };
        let Some(&(_, message)) = run.sealed.get(&seq) else {
            return Vec::new();
        };
        let n = run
            .pending
            .iter()
            .take_while(|f| f.message <= message)
            .count();
        self.written = self.written.max(message + 1);
        run.pending.drain(..n).collect()
    }
}

impl LiveTokens {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, RunTokens>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts counting `run_id`'s fragments: the stream's side and the `Send` reader's.
    pub fn relay(&self, ns: &Namespace, run_id: &str) -> (Relay, Intake) {
        let key = (ns.clone(), run_id.to_string());
        self.lock().entry(key.clone()).or_default();
        let notify = Arc::new(Notify::new());
        (
            Relay {
                tokens: self.clone(),
                key: key.clone(),
                notify: notify.clone(),
                written: 0,
            },
            Intake {
                tokens: self.clone(),
                key,
                notify,
            },
        )
    }

    /// The count for the snapshot at `seq`: sealed now (every fragment received so far of
    /// the open message, which then restarts at 0) or earlier; `None` when no relay of this
    /// run is live.
    pub fn seal(&self, ns: &Namespace, run_id: &str, seq: u64) -> Option<u32> {
        let mut runs = self.lock();
        let run = runs.get_mut(&(ns.clone(), run_id.to_string()))?;
        if let Some((n, _)) = run.sealed.get(&seq) {
            return Some(*n);
        }
        let n = std::mem::take(&mut run.open);
        run.sealed.insert(seq, (n, run.message));
        run.message += 1;
        Some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(f: Vec<Fragment>) -> Vec<(String, u32)> {
        f.into_iter().map(|f| (f.text, f.delta)).collect()
    }

    #[test]
    fn a_seal_takes_the_received_count_once_per_seq() {
        let live = LiveTokens::default();
        let ns = Namespace::default();
        assert_eq!(live.seal(&ns, "r", 3), None);
        let (relay, intake) = live.relay(&ns, "r");
        assert!(intake.push("a".into()));
        assert!(intake.push("b".into()));
        assert_eq!(live.seal(&ns, "r", 3), Some(2));
        assert_eq!(live.seal(&ns, "r", 3), Some(2));
        assert!(intake.push("c".into()));
        assert_eq!(live.seal(&ns, "r", 6), Some(1));
        drop(relay);
        assert_eq!(live.seal(&ns, "r", 9), None);
        assert!(!intake.push("d".into()));
    }

    /// The race of issue 20: the snapshot is read (sealed) while its fragments still wait
    /// to be sent. They count in its delta and go out before it; a fragment received after
    /// the seal waits until the snapshot is written.
    #[test]
    fn fragments_waiting_when_the_snapshot_is_sealed_count_and_go_before_it() {
        let live = LiveTokens::default();
        let ns = Namespace::default();
        let (mut relay, intake) = live.relay(&ns, "r");
        intake.push("Hel".into());
        intake.push("lo".into());
        // Another stream of the run reads the snapshot at seq 4 first.
        assert_eq!(live.seal(&ns, "r", 4), Some(2));
        intake.push("Next".into());
        // Nothing sent yet; the next message's fragment must wait for the snapshot.
        let before = relay.before_frame(4);
        assert_eq!(texts(before), [("Hel".into(), 1), ("lo".into(), 2)]);
        assert_eq!(texts(relay.sendable()), [("Next".into(), 1)]);
        // A frame that is not a sealed snapshot releases nothing.
        intake.push("more".into());
        assert!(relay.before_frame(5).is_empty());
        assert_eq!(texts(relay.sendable()), [("more".into(), 2)]);
    }

    #[test]
    fn a_fragment_of_a_later_message_waits_while_its_snapshot_is_unwritten() {
        let live = LiveTokens::default();
        let ns = Namespace::default();
        let (mut relay, intake) = live.relay(&ns, "r");
        intake.push("a".into());
        assert_eq!(live.seal(&ns, "r", 2), Some(1));
        intake.push("b".into());
        // The stream woke for the fragments before it read the snapshot: only "a" may go.
        assert_eq!(texts(relay.sendable()), [("a".into(), 1)]);
        assert!(relay.before_frame(2).is_empty());
        assert_eq!(texts(relay.sendable()), [("b".into(), 1)]);
    }
}
