//! [`FollowHub`]: wakes the streams that follow a run when the store commits an append to
//! it. One task reads the store's append notifications and bumps a `watch` per followed run,
//! so an append wakes only that run's followers (not every open stream). A notification the
//! task missed (the broadcast overflowed) wakes every follower: each then re-reads the store,
//! so a lost wake-up costs a read, never an event.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{broadcast, watch};

use crate::store::{EventAppended, Namespace};

type Key = (Namespace, String);

/// The per-run wake-ups.
#[derive(Clone, Default)]
pub struct FollowHub {
    runs: Arc<Mutex<HashMap<Key, watch::Sender<u64>>>>,
}

/// A follower's wake-up; unregisters itself when dropped.
pub struct Follow {
    hub: FollowHub,
    key: Key,
    pub rx: watch::Receiver<u64>,
}

impl Drop for Follow {
    fn drop(&mut self) {
        let mut runs = self.hub.runs.lock().unwrap_or_else(|p| p.into_inner());
        // Our receiver is still alive here: the entry goes when we are its last one.
        if runs
            .get(&self.key)
            .is_some_and(|tx| tx.receiver_count() <= 1)
        {
            runs.remove(&self.key);
        }
    }
}

impl FollowHub {
    /// Starts forwarding `notices` on the current runtime.
    pub fn start(notices: broadcast::Receiver<EventAppended>) -> FollowHub {
        let hub = FollowHub::default();
        let runs = hub.runs.clone();
        tokio::spawn(forward(runs, notices));
        hub
    }

    /// Wake-ups for `run_id` from now on.
    pub fn follow(&self, ns: &Namespace, run_id: &str) -> Follow {
        let key = (ns.clone(), run_id.to_string());
        let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        let rx = runs
            .entry(key.clone())
            .or_insert_with(|| watch::channel(0).0)
            .subscribe();
        Follow {
            hub: self.clone(),
            key,
            rx,
        }
    }
}

async fn forward(
    runs: Arc<Mutex<HashMap<Key, watch::Sender<u64>>>>,
    mut notices: broadcast::Receiver<EventAppended>,
) {
    loop {
        match notices.recv().await {
            Ok(n) => {
                let runs = runs.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(tx) = runs.get(&(n.ns, n.run_id)) {
                    tx.send_replace(n.seq);
                }
            }
            Err(broadcast::error::RecvError::Lagged(_)) => {
                let runs = runs.lock().unwrap_or_else(|p| p.into_inner());
                for tx in runs.values() {
                    tx.send_modify(|_| {});
                }
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}
