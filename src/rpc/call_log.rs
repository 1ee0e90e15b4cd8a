//! The one log line of every callback call, shared by both services, and the call's
//! metrics (recorded with the line, from the same outcome and latency).
//!
//! The line is written when the call ends, and also when it never does: when the bridge
//! hangs up, hyper drops the handler's future mid-call, and the guard's `Drop` writes the
//! line with outcome `cancelled`. For a store write that outcome does not mean "not
//! written": a write handed to the store runs to its commit whether or not anyone still
//! waits for the answer.

use std::time::{Duration, Instant};

/// What a service puts in its line besides outcome, latency and error.
pub trait CallFields {
    fn write(&self, outcome: &'static str, latency: Duration, error: Option<&str>);
}

/// A call's log line, written exactly once.
pub struct CallLog<F: CallFields> {
    started: Instant,
    pub fields: F,
    /// The error to log with the outcome. Left unset where the message quotes what must not
    /// reach the log (a tool's arguments).
    pub error: Option<String>,
    done: bool,
}

impl<F: CallFields> CallLog<F> {
    pub fn start(fields: F) -> Self {
        CallLog {
            started: Instant::now(),
            fields,
            error: None,
            done: false,
        }
    }

    /// Writes the line with `outcome` (`ok`, a Connect code, a tool outcome).
    pub fn finish(&mut self, outcome: &'static str) {
        self.done = true;
        self.write(outcome);
    }

    fn write(&self, outcome: &'static str) {
        self.fields
            .write(outcome, self.started.elapsed(), self.error.as_deref());
    }
}

impl<F: CallFields> Drop for CallLog<F> {
    fn drop(&mut self) {
        if !self.done {
            self.write("cancelled");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Default, Clone)]
    struct Lines(Arc<Mutex<Vec<String>>>);

    impl CallFields for Lines {
        fn write(&self, outcome: &'static str, _latency: Duration, error: Option<&str>) {
            self.0
                .lock()
                .unwrap()
                .push(format!("{outcome} {}", error.unwrap_or("-")));
        }
    }

    #[test]
    fn one_line_per_call_and_cancelled_when_dropped_unfinished() {
        let lines = Lines::default();
        let mut log = CallLog::start(lines.clone());
        log.error = Some("boom".into());
        log.finish("internal");
        drop(log);
        drop(CallLog::start(lines.clone()));
        assert_eq!(*lines.0.lock().unwrap(), ["internal boom", "cancelled -"]);
    }
}
