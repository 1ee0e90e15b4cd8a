//! Requests refused for their bearer token: counted (`callbackd_auth_refused_total`), and
//! logged at most once a second with how many were left out since, so that a client
//! retrying a wrong token in a loop (or someone trying tokens) cannot flood the log.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// Refusals so far, in this process.
static REFUSED: AtomicU64 = AtomicU64::new(0);
/// The second (since [`START`]) of the last logged refusal, plus one; 0: none yet.
static LOGGED_AT: AtomicU64 = AtomicU64::new(0);
/// Refusals not logged since the last line.
static UNLOGGED: AtomicU64 = AtomicU64::new(0);
static START: OnceLock<Instant> = OnceLock::new();

/// Requests refused for their token so far.
pub fn refused_total() -> u64 {
    REFUSED.load(Ordering::Relaxed)
}

/// Counts a refusal by `service` (`wrong`: a token was presented, not none) and logs it,
/// unless a refusal was logged in the last second; whether it logged.
pub fn refused(service: &'static str, wrong: bool) -> bool {
    REFUSED.fetch_add(1, Ordering::Relaxed);
    let second = START.get_or_init(Instant::now).elapsed().as_secs() + 1;
    let last = LOGGED_AT.load(Ordering::Relaxed);
    let due = last == 0 || second > last;
    if !due
        || LOGGED_AT
            .compare_exchange(last, second, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    {
        UNLOGGED.fetch_add(1, Ordering::Relaxed);
        return false;
    }
    let left_out = UNLOGGED.swap(0, Ordering::Relaxed);
    // The header itself is never logged: it may be a real token for another service.
    if wrong {
        tracing::warn!(
            service,
            left_out,
            "request with a wrong bearer token (one such line a second at most; left_out: \
             refusals since the last one)"
        );
    } else {
        tracing::debug!(service, left_out, "request without bearer token");
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_is_counted_and_at_most_one_a_second_logged() {
        let before = refused_total();
        let logged = (0..1000).filter(|_| refused("store", true)).count();
        assert!(refused_total() >= before + 1000);
        // One line, two if a second turned over meanwhile.
        assert!(
            logged <= 2,
            "{logged} lines for 1000 refusals in well under 2 s"
        );
    }
}
