//! A progress line on stderr for the long commands (`backup`, `export`, `import`): redrawn in
//! place when stderr is a terminal, one final line otherwise (logs and CI output stay clean).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Draws `what: 42% (12.3 of 29.0 MiB)` at most every 100 ms.
pub struct Progress {
    what: &'static str,
    terminal: bool,
    last: Option<Instant>,
    drawn: bool,
}

impl Progress {
    /// A progress line for `what`; silent until [`finish`](Self::finish) unless stderr is
    /// a terminal.
    pub fn new(what: &'static str) -> Progress {
        Progress {
            what,
            terminal: std::io::stderr().is_terminal(),
            last: None,
            drawn: false,
        }
    }

    /// `done` of `total` bytes (the total may be an estimate: the percentage stops at 99
    /// until [`finish`](Self::finish)).
    pub fn update(&mut self, done: u64, total: u64) {
        if !self.terminal
            || self
                .last
                .is_some_and(|t| t.elapsed() < Duration::from_millis(100))
        {
            return;
        }
        self.last = Some(Instant::now());
        let pct = done
            .saturating_mul(100)
            .checked_div(total)
            .unwrap_or(0)
            .min(99);
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[2K{}: {pct:>2}% ({} of {})",
            self.what,
            mib(done),
            mib(total)
        );
        let _ = err.flush();
        self.drawn = true;
    }

    /// Replaces the line with `text` (a step without a size: "checking the copy").
    pub fn step(&mut self, text: &str) {
        if !self.terminal {
            return;
        }
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{}: {text}", self.what);
        let _ = err.flush();
        self.drawn = true;
    }

    /// Replaces the line with `summary` (printed on a terminal or not).
    pub fn finish(self, summary: &str) {
        let mut err = std::io::stderr().lock();
        if self.drawn {
            let _ = write!(err, "\r\x1b[2K");
        }
        let _ = writeln!(err, "{}: {summary}", self.what);
    }
}

/// `12.3 MiB`.
pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}
