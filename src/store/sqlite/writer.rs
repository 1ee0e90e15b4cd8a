//! The single writer: one thread owns the write connection and runs every write, batching
//! whatever is queued into one transaction and one commit.
//!
//! Why: SQLite has one writer at a time anyway, and the cost of a write is dominated by the
//! commit (the WAL append and, with `synchronous=full`, the fsync). Concurrent appends from
//! many runs share one commit instead of queueing for the lock. Each job runs inside its own
//! savepoint, so a failing job (a duplicate create, say) does not undo its neighbours. A job
//! is acknowledged only after the batch's COMMIT returned.

use std::sync::mpsc::{Receiver, TryRecvError};

use rusqlite::Connection;

use crate::store::StoreError;

/// The most jobs one transaction takes; bounds the latency a long queue adds to its first job.
const MAX_BATCH: usize = 256;

/// A unit of work for the writer: `run` inside the transaction, then `finish` with the
/// outcome of the commit (or the first error that undid the transaction).
pub trait Job: Send {
    fn run(&mut self, conn: &Connection) -> Result<(), StoreError>;
    fn finish(self: Box<Self>, committed: Result<(), StoreError>);
}

/// The writer thread's loop; returns when every sender is gone and the queue is drained.
#[allow(clippy::needless_pass_by_value)] // the thread owns both until it exits
pub fn run(conn: Connection, rx: Receiver<Box<dyn Job>>) {
    let mut batch: Vec<Box<dyn Job>> = Vec::with_capacity(MAX_BATCH);
    while let Ok(first) = rx.recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            }
        }
        run_batch(&conn, &mut batch);
    }
}

fn run_batch(conn: &Connection, batch: &mut Vec<Box<dyn Job>>) {
    if let Err(e) = exec(conn, "BEGIN IMMEDIATE") {
        let err = StoreError::from(e);
        for job in batch.drain(..) {
            job.finish(Err(err.clone()));
        }
        return;
    }
    // Outcome of each job's own work; a failed job is already rolled back to its savepoint.
    let mut outcomes: Vec<Result<(), StoreError>> = Vec::with_capacity(batch.len());
    let mut aborted: Option<StoreError> = None;
    for job in batch.iter_mut() {
        if aborted.is_some() {
            break;
        }
        let result = exec(conn, "SAVEPOINT job")
            .map_err(StoreError::from)
            .and_then(|()| job.run(conn));
        if conn.is_autocommit() {
            // SQLite rolled the whole transaction back (it does so on some errors, such as
            // SQLITE_FULL): every job of this batch is undone, so none may be acknowledged.
            aborted =
                Some(result.err().unwrap_or_else(|| {
                    StoreError::Internal("transaction ended unexpectedly".into())
                }));
            break;
        }
        let close = if result.is_ok() {
            exec(conn, "RELEASE job")
        } else {
            exec(conn, "ROLLBACK TO job").and_then(|()| exec(conn, "RELEASE job"))
        };
        if let Err(e) = close {
            aborted = Some(e.into());
            break;
        }
        outcomes.push(result);
    }
    let commit = match aborted {
        Some(e) => Err(e),
        None => exec(conn, "COMMIT").map_err(StoreError::from),
    };
    if let Err(e) = &commit {
        tracing::error!(error = %e, jobs = batch.len(), "store write transaction failed; nothing of it was written");
        if !conn.is_autocommit() {
            let _ = exec(conn, "ROLLBACK");
        }
    }
    let mut outcomes = outcomes.into_iter();
    for job in batch.drain(..) {
        let result = match (&commit, outcomes.next()) {
            (Ok(()), Some(own)) => own,
            (Err(e), _) => Err(e.clone()),
            (Ok(()), None) => Err(StoreError::Internal("job did not run".into())),
        };
        job.finish(result);
    }
}

/// Runs one statement without results, prepared once per connection: the transaction
/// statements run several times per batch, and parsing them each time (`execute_batch`) was
/// a tenth of an append's CPU.
fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}
