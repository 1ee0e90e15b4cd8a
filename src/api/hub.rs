//! [`FollowHub`]: wakes the streams that follow a run when the store commits an append to
//! it, and holds each followed run's shared [`Feed`] of frames. One task reads the store's
//! append notifications and bumps a `watch` per followed run, so an append wakes only that
//! run's followers (not every open stream). A notification the task missed (the broadcast
//! overflowed), or a store's [`StoreNotice::Resync`] (on PostgreSQL: the connection that
//! hears other daemons' appends was lost and is back), wakes every follower: each then
//! re-reads, so a lost wake-up costs a read, never an event.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{broadcast, watch};

use super::feed::Feed;
use crate::store::{Namespace, StoreNotice};

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
    /// Starts forwarding `notices` on the current runtime.
    pub fn start(notices: broadcast::Receiver<StoreNotice>) -> FollowHub {
        let hub = FollowHub::default();
        tokio::spawn(forward(hub.runs.clone(), notices));
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

async fn forward(runs: Runs, mut notices: broadcast::Receiver<StoreNotice>) {
    loop {
        match notices.recv().await {
            Ok(StoreNotice::Appended(n) | StoreNotice::Remote(n)) => {
                let runs = runs.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(e) = runs.get(&(n.ns, n.run_id)) {
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
            Ok(StoreNotice::Resync) | Err(broadcast::error::RecvError::Lagged(_)) => {
                let runs = runs.lock().unwrap_or_else(|p| p.into_inner());
                // Unknown seqs: u64::MAX makes every follower read the store.
                for e in runs.values() {
                    e.tx.send_replace(u64::MAX);
                }
            }
            // Not a run's events: the approvals follow these (`approvals::wake`).
            Ok(StoreNotice::ApprovalChanged { .. }) => {}
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}
