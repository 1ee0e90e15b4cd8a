//! The single writer: one write connection, every write in a transaction that is committed
//! before the write is acknowledged.
//!
//! Why one: SQLite has one writer at a time anyway, and the cost of a write is dominated by
//! the commit (the WAL append and, with `synchronous=full`, the fsync). When writes arrive
//! together they go to the writer thread, which batches whatever is queued into one
//! transaction and one commit: concurrent appends from many runs share one commit instead
//! of queueing for the lock. Each job of a batch runs inside its own savepoint, so a failing
//! job (a duplicate create, say) does not undo its neighbours.
//!
//! When the connection is free and nothing is queued, the caller runs its write right where
//! it is ([`Writer::try_inline`]), on the async worker thread. That is the common case of a
//! bridge (a store call at a time) and it saves two thread hand-offs per write: measured on
//! 2 cores, the wake-ups of the writer thread and back cost more CPU than the write itself.
//! An uncontended write with `synchronous=normal` takes tens of microseconds (no fsync), so
//! the worker is not held long; with `synchronous=full` every write goes to the thread.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError, TryLockError};

use rusqlite::Connection;

use super::wal;
use crate::store::StoreError;

/// The most jobs one transaction takes; bounds the latency a long queue adds to its first job.
const MAX_BATCH: usize = 256;

/// A unit of work for the writer: `run` inside the transaction, then `finish` with the
/// outcome of the commit (or the first error that undid the transaction).
pub trait Job: Send {
    fn run(&mut self, conn: &Connection) -> Result<(), StoreError>;
    fn finish(self: Box<Self>, committed: Result<(), StoreError>);
}

/// The write connection, shared by the writer thread and inline writers.
pub struct Writer {
    conn: Mutex<Connection>,
    /// Jobs handed to the writer thread and not finished yet; inline writes wait for zero,
    /// so that queued jobs are not overtaken indefinitely.
    queued: AtomicUsize,
    /// Told of every commit, for the checkpoint thread.
    wal: Arc<wal::Signal>,
}

impl Writer {
    pub fn new(conn: Connection, wal: Arc<wal::Signal>) -> Writer {
        Writer {
            conn: Mutex::new(conn),
            queued: AtomicUsize::new(0),
            wal,
        }
    }

    /// Runs `job` on the calling thread, as a transaction of its own, if the connection is
    /// free and no job is queued; otherwise gives it back (for [`Writer::enqueued`] and the
    /// writer thread). Never blocks on the lock.
    pub fn try_inline(&self, job: Box<dyn Job>) -> Result<(), Box<dyn Job>> {
        if self.queued.load(Ordering::Acquire) != 0 {
            return Err(job);
        }
        let conn = match self.conn.try_lock() {
            Ok(conn) => conn,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return Err(job),
        };
        run_batch(&conn, &mut vec![job]);
        drop(conn);
        self.wal.committed();
        Ok(())
    }

    /// Counts a job about to be sent to the writer thread.
    pub fn enqueued(&self) {
        self.queued.fetch_add(1, Ordering::AcqRel);
    }

    /// Undoes [`Writer::enqueued`] for a job that could not be sent.
    pub fn not_enqueued(&self) {
        self.queued.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The writer thread's loop; returns when every sender is gone and the queue is drained.
#[allow(clippy::needless_pass_by_value)] // the thread owns both until it exits
pub fn run(writer: Arc<Writer>, rx: Receiver<Box<dyn Job>>) {
    let mut batch: Vec<Box<dyn Job>> = Vec::with_capacity(MAX_BATCH);
    while let Ok(first) = rx.recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            }
        }
        let n = batch.len();
        {
            let conn = writer.conn.lock().unwrap_or_else(PoisonError::into_inner);
            run_batch(&conn, &mut batch);
        }
        writer.queued.fetch_sub(n, Ordering::AcqRel);
        writer.wal.committed();
    }
}

fn run_batch(conn: &Connection, batch: &mut Vec<Box<dyn Job>>) {
    if !conn.is_autocommit() {
        // A job panicked mid-transaction (the panic was caught above us): undo what it left.
        let _ = exec(conn, "ROLLBACK");
    }
    if batch.len() == 1 {
        return run_alone(conn, batch.pop().expect("one job"));
    }
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
            let _ = conn.execute_batch("ROLLBACK");
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

/// One job, one transaction: no savepoint needed, since a failure undoes only this job.
fn run_alone(conn: &Connection, mut job: Box<dyn Job>) {
    if let Err(e) = exec(conn, "BEGIN IMMEDIATE") {
        return job.finish(Err(e.into()));
    }
    let result = job.run(conn);
    let committed = match result {
        Ok(()) => exec(conn, "COMMIT").map_err(StoreError::from),
        Err(e) => {
            if !conn.is_autocommit() {
                let _ = exec(conn, "ROLLBACK");
            }
            return job.finish(Err(e));
        }
    };
    if let Err(e) = &committed {
        tracing::error!(error = %e, jobs = 1, "store write transaction failed; nothing of it was written");
        if !conn.is_autocommit() {
            let _ = exec(conn, "ROLLBACK");
        }
    }
    job.finish(committed);
}

/// Runs one statement without results, prepared once per connection: the transaction
/// statements run several times per batch, and parsing them each time (`execute_batch`) was
/// a tenth of an append's CPU.
fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}
