//! Decisions made through another daemon, heard at once: on PostgreSQL every change of an
//! approval sends a `NOTIFY` with its id in the transaction that makes it, and the store
//! turns other daemons' into [`StoreNotice::ApprovalChanged`]. The held call of that id,
//! if this daemon holds it, is woken to re-read its row. A notice that may have been missed
//! (the listening connection came back, or this receiver lagged) wakes every held call.
//! SQLite has no such channel between processes: there the holder's slow poll is what
//! hears another daemon.

use tokio::sync::broadcast::error::RecvError;

use super::Approvals;
use crate::store::StoreNotice;

impl Approvals {
    /// Wakes held calls on other daemons' changes, until aborted (nothing to do without a
    /// store).
    pub fn spawn_wake(&self) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        let notices = me.inner.store.as_ref().map(|s| s.subscribe());
        tokio::spawn(async move {
            let Some(mut notices) = notices else { return };
            loop {
                match notices.recv().await {
                    Ok(StoreNotice::ApprovalChanged { ns, id }) => {
                        me.wake(|w_id, w_ns| w_id == id && *w_ns == ns)
                    }
                    Ok(StoreNotice::Resync) | Err(RecvError::Lagged(_)) => me.wake(|_, _| true),
                    Ok(_) => {}
                    Err(RecvError::Closed) => return,
                }
            }
        })
    }

    /// Wakes the held calls `which` selects (by approval id and namespace).
    fn wake(&self, which: impl Fn(&str, &crate::store::Namespace) -> bool) {
        for (id, w) in self.lock().iter() {
            if which(id, &w.ns) {
                // A permit is kept if the holder is not waiting right now: never lost.
                w.wake.notify_one();
            }
        }
    }
}
