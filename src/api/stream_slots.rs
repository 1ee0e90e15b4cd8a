//! [`StreamSlots`]: the places under `api.max_streams`, and each namespace's share of them.
//!
//! Streams are long-lived (a follower of a run waiting on a person's approval holds its
//! stream for minutes), so a cap on the number open protects the daemon's memory, and a cap
//! on what one namespace may hold keeps that protection from becoming a denial of service:
//! without it, any token (even a read-only one) could open `max_streams` streams of its own
//! runs and every other namespace's streams would answer 429 until they ended.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::store::Namespace;

/// The open streams, in total and per namespace.
pub struct StreamSlots {
    total: Arc<Semaphore>,
    max: usize,
    /// `api.max_streams_per_namespace` as configured (0: automatic, see [`Self::share`]).
    per_namespace: usize,
    open: Arc<Mutex<HashMap<Namespace, usize>>>,
}

/// A stream's place: given back when dropped (when the stream's task ends).
pub struct StreamSlot {
    _permit: OwnedSemaphorePermit,
    ns: Namespace,
    open: Arc<Mutex<HashMap<Namespace, usize>>>,
}

/// Why a stream could not get a place.
#[derive(Debug, PartialEq, Eq)]
pub enum Full {
    /// `api.max_streams` streams are open.
    Total(usize),
    /// The namespace holds its share already.
    Namespace(usize),
}

impl StreamSlots {
    pub fn new(max: usize, per_namespace: usize) -> Self {
        StreamSlots {
            total: Arc::new(Semaphore::new(max)),
            max,
            per_namespace,
            open: Arc::default(),
        }
    }

    /// How many streams one namespace may hold when `namespaces` are configured: the
    /// configured share, or (0, automatic) all of them with one namespace and half of them
    /// (at least 1) with more, so the others always find room.
    pub fn share(&self, namespaces: usize) -> usize {
        match self.per_namespace {
            0 if namespaces > 1 => (self.max / 2).max(1),
            0 => self.max,
            n => n.min(self.max),
        }
    }

    /// A place for a stream of `ns`, when `namespaces` are configured.
    pub fn take(&self, ns: &Namespace, namespaces: usize) -> Result<StreamSlot, Full> {
        let share = self.share(namespaces);
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let held = open.get(ns).copied().unwrap_or(0);
        if held >= share {
            return Err(Full::Namespace(share));
        }
        let permit = self
            .total
            .clone()
            .try_acquire_owned()
            .map_err(|_| Full::Total(self.max))?;
        open.insert(ns.clone(), held + 1);
        Ok(StreamSlot {
            _permit: permit,
            ns: ns.clone(),
            open: self.open.clone(),
        })
    }

    /// Open streams now.
    pub fn open(&self) -> usize {
        self.max - self.total.available_permits()
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = open.get_mut(&self.ns) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ns);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(name: &str) -> Namespace {
        Namespace::new(name)
    }

    #[test]
    fn one_namespace_cannot_take_the_others_share() {
        let slots = StreamSlots::new(4, 0);
        let a: Vec<_> = (0..2).map(|_| slots.take(&ns("a"), 2).unwrap()).collect();
        assert_eq!(slots.take(&ns("a"), 2).err(), Some(Full::Namespace(2)));
        let b: Vec<_> = (0..2).map(|_| slots.take(&ns("b"), 2).unwrap()).collect();
        assert_eq!(slots.take(&ns("c"), 2).err(), Some(Full::Total(4)));
        drop(a);
        assert_eq!(slots.open(), 2);
        assert!(slots.take(&ns("a"), 2).is_ok(), "a's places came back");
        drop(b);
    }

    #[test]
    fn a_single_namespace_may_use_the_whole_cap_and_a_configured_share_is_kept() {
        let slots = StreamSlots::new(4, 0);
        assert_eq!(slots.share(1), 4);
        assert_eq!(StreamSlots::new(1, 0).share(3), 1);
        assert_eq!(StreamSlots::new(10, 3).share(1), 3);
        assert_eq!(StreamSlots::new(10, 30).share(2), 10);
    }
}
