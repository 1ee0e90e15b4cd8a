//! [`FollowHub`]: wakes the streams that follow a run when the store commits an append to
//! it, and holds each followed run's shared [`Feed`] of frames. A store listener (called on
//! the committing thread, [`crate::store::Notices`]) bumps a `watch` per followed run, so an
//! append wakes only that run's followers (not every open stream), and an append to a run
//! nobody follows costs a look into a map. A store's [`StoreNotice::Resync`] (on
//! PostgreSQL: the connection that hears other daemons' appends was lost and is back) wakes
//! every follower: each then re-reads, so a lost wake-up costs a read, never an event.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::feed::Feed;
use crate::store::{Namespace, Store, StoreNotice};

type Key = (Namespace, String);

/// A followed run: its wake-ups and its shared frames.
struct Entry {
    tx: watch::Sender<u64>,
    feed: Arc<Feed>,
}

type Runs = Arc<Mutex<HashMap<Key, Entry>>>;

/// The followed runs.
#[derive(Clone, Default)]
pub struct FollowHub {
    runs: Runs,
}

/// A follower's wake-up and its run's feed; unregisters itself when dropped.
pub struct Follow {
    hub: FollowHub,
    key: Key,
    pub rx: watch::Receiver<u64>,
    pub feed: Arc<Feed>,
}

impl Drop for Follow {
    fn drop(&mut self) {
        let mut runs = self.hub.runs.lock().unwrap_or_else(|p| p.into_inner());
        // Our receiver is still alive here: the entry goes when we are its last one.
        if runs
            .get(&self.key)
            .is_some_and(|e| e.tx.receiver_count() <= 1)
        {
            runs.remove(&self.key);
        }
    }
}

impl FollowHub {
    /// A hub woken by `store`'s notices from now on.
    pub fn start(store: &dyn Store) -> FollowHub {
        let hub = FollowHub::default();
        let runs = hub.runs.clone();
        store.listen(Arc::new(move |notice| wake(&runs, notice)));
        hub
    }

    /// Wake-ups for `run_id` from now on, and its feed.
    pub fn follow(&self, ns: &Namespace, run_id: &str) -> Follow {
        let key = (ns.clone(), run_id.to_string());
        let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        let entry = runs.entry(key.clone()).or_insert_with(|| Entry {
            tx: watch::channel(0).0,
            feed: Arc::default(),
        });
        let (rx, feed) = (entry.tx.subscribe(), entry.feed.clone());
        Follow {
            hub: self.clone(),
            key,
            rx,
            feed,
        }
    }
}

/// Wakes the followers `notice` concerns; called on the thread that committed.
fn wake(runs: &Mutex<HashMap<Key, Entry>>, notice: &StoreNotice) {
    match notice {
        StoreNotice::Appended(n) | StoreNotice::Remote(n) => {
            let runs = runs.lock().unwrap_or_else(|p| p.into_inner());
            if runs.is_empty() {
                return;
            }
            if let Some(e) = runs.get(&(n.ns.clone(), n.run_id.clone())) {
                // Monotonic: a late notice of an older seq (another daemon's) must not
                // make a follower believe it has read everything.
                e.tx.send_modify(|v| {
                    *v = if *v == u64::MAX {
                        n.seq
                    } else {
                        (*v).max(n.seq)
                    }
                });
            }
        }
        StoreNotice::Resync => {
            let runs = runs.lock().unwrap_or_else(|p| p.into_inner());
            // Unknown seqs: u64::MAX makes every follower read the store.
            for e in runs.values() {
                e.tx.send_replace(u64::MAX);
            }
        }
        // Not a run's events: the approvals follow changes (`approvals::wake`), the daemon's
        // listeners a run's end (`app::run_ends`).
        StoreNotice::ApprovalChanged { .. } | StoreNotice::RunEnded { .. } => {}
    }
}
