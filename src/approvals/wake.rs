//! Decisions made through another daemon, heard at once: on PostgreSQL every change of an
//! approval sends a `NOTIFY` with its id in the transaction that makes it, and the store
//! turns other daemons' into [`StoreNotice::ApprovalChanged`]. The held call of that id,
//! if this daemon holds it, is woken to re-read its row. A notice that may have been missed
//! (the listening connection came back) wakes every held call. SQLite has no such channel
//! between processes: there the holder's slow poll is what hears another daemon.

use std::sync::{Arc, Weak};

use super::{Approvals, Inner};
use crate::store::{Store, StoreNotice};

/// Wakes held calls on other daemons' changes for as long as the approvals exist. A store
/// listener ([`crate::store::Notices`]): called where the notice is heard, it only looks
/// up the held call and wakes it. It holds the approvals weakly, since they hold the store.
pub(super) fn listen(store: &dyn Store, approvals: Weak<Inner>) {
    store.listen(Arc::new(move |notice| {
        let one = match notice {
            StoreNotice::ApprovalChanged { ns, id } => Some((ns, id)),
            StoreNotice::Resync => None,
            StoreNotice::Appended(_) | StoreNotice::Remote(_) | StoreNotice::RunEnded { .. } => {
                return
            }
        };
        let Some(inner) = approvals.upgrade() else {
            return;
        };
        let approvals = Approvals { inner };
        match one {
            Some((ns, id)) => approvals.wake(|w_id, w_ns| w_id == id && w_ns == ns),
            None => approvals.wake(|_, _| true),
        }
    }));
}

impl Approvals {
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
