//! [`Sending`]: the sessions a `POST .../messages` is starting a turn of, right now. The
//! bridge stores a new run's `request` a moment before the run API learns the run's id and
//! records the user message; a stream opened in between (a reader that found the run in the
//! session's list) would map `run_started` without its `input`. While a session is marked
//! here, that mapping waits for the text instead, so every reader gets the bytes a replay
//! gets, and a run started by another client (nobody sending here) never waits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::store::Namespace;

type Key = (Namespace, String);

/// The sessions with a turn being started, counted (two sends may overlap).
#[derive(Clone, Default)]
pub struct Sending(Arc<Mutex<HashMap<Key, usize>>>);

/// Marks a session as sending until dropped.
pub struct SendMark {
    sending: Sending,
    key: Key,
}

impl Sending {
    pub fn begin(&self, ns: &Namespace, session: &str) -> SendMark {
        let key = (ns.clone(), session.to_string());
        *self.lock().entry(key.clone()).or_default() += 1;
        SendMark {
            sending: self.clone(),
            key,
        }
    }

    pub fn is_sending(&self, ns: &Namespace, session: &str) -> bool {
        self.lock().contains_key(&(ns.clone(), session.to_string()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, usize>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for SendMark {
    fn drop(&mut self) {
        let mut map = self.sending.lock();
        if let Some(n) = map.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_sending_until_its_last_mark_is_dropped() {
        let s = Sending::default();
        let ns = Namespace::default();
        let a = s.begin(&ns, "s1");
        let b = s.begin(&ns, "s1");
        assert!(s.is_sending(&ns, "s1") && !s.is_sending(&ns, "s2"));
        drop(a);
        assert!(s.is_sending(&ns, "s1"));
        drop(b);
        assert!(!s.is_sending(&ns, "s1"));
    }
}
