//! [`Notices`]: how a backend announces what it committed ([`StoreNotice`]).
//!
//! Two kinds of receiver. A listener ([`Store::listen`](super::Store::listen)) is called
//! right where the notice happens, on the thread that committed (or that heard another
//! daemon's notice), and must return at once: it may lock a map and wake a task, never wait.
//! A subscriber ([`Store::subscribe`](super::Store::subscribe)) gets its own copy through a
//! tokio broadcast channel.
//!
//! Why listeners: the run API's follow hub and the approvals' wake-up used to be tasks that
//! awaited the broadcast, so every append woke the main runtime's worker twice, followers or
//! not: measured with `perf` at one appending client, a fifth of the daemon's CPU went to
//! that thread parking and waking (BENCHMARKS.md, "The store alone"). As listeners they cost
//! a lookup in an empty map when nobody follows the run. A listener cannot lag, so it never
//! sees the broadcast's `Lagged`; it still gets [`StoreNotice::Resync`].

use std::sync::{Arc, OnceLock, RwLock};

use tokio::sync::broadcast;

use super::outbox::Composer;
use super::StoreNotice;

/// Called with every notice, on the announcing thread; must not block.
pub type Listener = Arc<dyn Fn(&StoreNotice) + Send + Sync>;

/// A backend's announcer: listeners first, then the broadcast.
pub struct Notices {
    listeners: RwLock<Vec<Listener>>,
    broadcast: broadcast::Sender<StoreNotice>,
    /// What a write records for the webhooks, inside its own transaction (the other way a
    /// backend tells what it did, durable where a notice is not); set once by the daemon.
    outbox: OnceLock<Arc<dyn Composer>>,
}

impl Notices {
    /// A broadcast that keeps `capacity` notices for slow subscribers.
    pub fn new(capacity: usize) -> Notices {
        Notices {
            listeners: RwLock::default(),
            broadcast: broadcast::channel(capacity).0,
            outbox: OnceLock::new(),
        }
    }

    /// Sets the outbox's composer (the first one set stays).
    pub fn set_outbox(&self, composer: Arc<dyn Composer>) {
        let _ = self.outbox.set(composer);
    }

    /// The outbox's composer, if the daemon set one.
    pub fn outbox(&self) -> Option<&dyn Composer> {
        self.outbox.get().map(|c| &**c)
    }

    /// [`Notices::outbox`], owned, for a write run on another thread or task.
    pub fn outbox_arc(&self) -> Option<Arc<dyn Composer>> {
        self.outbox.get().cloned()
    }

    /// Tells every listener, then every subscriber (none is fine: nobody is following).
    pub fn send(&self, notice: StoreNotice) {
        for listener in self
            .listeners
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
        {
            listener(&notice);
        }
        if self.broadcast.receiver_count() > 0 {
            let _ = self.broadcast.send(notice);
        }
    }

    pub fn listen(&self, listener: Listener) {
        self.listeners
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(listener);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<StoreNotice> {
        self.broadcast.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{EventAppended, Namespace};
    use std::sync::Mutex;

    fn appended(seq: u64) -> StoreNotice {
        StoreNotice::Appended(EventAppended {
            ns: Namespace::new("default"),
            run_id: "r".into(),
            seq,
        })
    }

    #[test]
    fn listeners_hear_every_notice_in_order_and_subscribers_still_get_theirs() {
        let notices = Notices::new(4);
        let heard = Arc::new(Mutex::new(Vec::new()));
        let h = heard.clone();
        notices.listen(Arc::new(move |n| {
            if let StoreNotice::Appended(e) = n {
                h.lock().unwrap().push(e.seq);
            }
        }));
        let mut rx = notices.subscribe();
        // More than the broadcast keeps: the subscriber lags, the listener does not.
        for seq in 1..=6 {
            notices.send(appended(seq));
        }
        notices.send(StoreNotice::Resync);
        assert_eq!(*heard.lock().unwrap(), vec![1, 2, 3, 4, 5, 6]);
        assert!(matches!(
            rx.try_recv(),
            Err(broadcast::error::TryRecvError::Lagged(3))
        ));
        assert!(matches!(rx.try_recv(), Ok(StoreNotice::Appended(e)) if e.seq == 4));
    }
}
