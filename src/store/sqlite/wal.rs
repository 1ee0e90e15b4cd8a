//! WAL checkpoints off the write path.
//!
//! SQLite's automatic checkpoint runs inside the commit that crosses the threshold (1000
//! WAL pages), on the writing connection: it copies the WAL into the database file and
//! fsyncs both, while every other write waits. Measured under 64 appending clients: one
//! fsync every ~200 commits, 4 ms median and 14 ms at worst, a quarter of the run spent with
//! the writer stalled and the CPUs idle. Here a thread with its own connection runs a
//! PASSIVE checkpoint after every [`EVERY`] commits instead; the writer keeps appending to
//! the WAL meanwhile, and SQLite restarts the WAL from its beginning at the next write once
//! it has been copied. Durability does not change: with `synchronous=normal` a commit is
//! never fsynced and a checkpoint always is, whichever connection runs it; with `full` every
//! commit is fsynced before it is acknowledged anyway.
//!
//! The write connection keeps SQLite's own checkpoint, at [`BACKSTOP_PAGES`]. Under
//! continuous writes that is what restarts the WAL: a checkpoint on another connection
//! never quite catches up with a writer that keeps adding frames, and the WAL restarts only
//! once every frame is copied. Since this thread has copied and synced nearly everything by
//! then, the writer's checkpoint has little left to do. The WAL file stays under ~40 MB;
//! measured under the bench, a threshold of 1000 pages (SQLite's default, a 4-6 MB WAL)
//! cost a fifth of the throughput at 64 clients and doubled the p99.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use rusqlite::Connection;

/// Commits between two checkpoints: about 250 WAL pages for lone appends, more for
/// batches.
pub const EVERY: u64 = 64;

/// `wal_autocheckpoint` of the write connection (pages of 4 KiB; SQLite's default is 1000).
pub const BACKSTOP_PAGES: u32 = 10_000;

/// What the writer and the checkpoint thread share.
#[derive(Default)]
pub struct Signal {
    commits: AtomicU64,
    stop: Mutex<bool>,
    wake: Condvar,
}

impl Signal {
    /// Counts a commit of the write connection; wakes the checkpoint thread every
    /// [`EVERY`] of them (one lock and a wake-up then, an atomic add otherwise).
    pub fn committed(&self) {
        let n = self.commits.fetch_add(1, Ordering::AcqRel) + 1;
        if n % EVERY == 0 {
            let _guard = self.stop.lock().unwrap_or_else(PoisonError::into_inner);
            self.wake.notify_one();
        }
    }

    /// Ends the checkpoint thread.
    fn stop(&self) {
        *self.stop.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.wake.notify_one();
    }
}

/// Stops the checkpoint thread when dropped (with the store), and waits for it.
pub struct Checkpointer {
    signal: Arc<Signal>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts the checkpoint thread on `conn`, a connection of its own.
    pub fn start(conn: Connection, signal: Arc<Signal>) -> std::io::Result<Checkpointer> {
        let thread_signal = signal.clone();
        let thread = std::thread::Builder::new()
            .name("callbackd-checkpoint".into())
            .spawn(move || run(&conn, &thread_signal))?;
        Ok(Checkpointer {
            signal,
            thread: Some(thread),
        })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.signal.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(conn: &Connection, signal: &Signal) {
    let mut done = 0;
    loop {
        {
            let mut stop = signal.stop.lock().unwrap_or_else(PoisonError::into_inner);
            while !*stop && signal.commits.load(Ordering::Acquire) < done + EVERY {
                stop = signal
                    .wake
                    .wait(stop)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if *stop {
                return;
            }
        }
        done = signal.commits.load(Ordering::Acquire);
        // PASSIVE: copies what no reader still needs, never waits for the writer or readers.
        let result = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
            Ok((row.get::<_, i64>(1)?, row.get::<_, i64>(2)?))
        });
        match result {
            Ok((wal_pages, copied)) => {
                tracing::trace!(wal_pages, copied, "WAL checkpoint");
            }
            Err(e) => tracing::warn!(error = %e, "WAL checkpoint failed; will retry"),
        }
    }
}
