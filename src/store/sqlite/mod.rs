//! [`SqliteStore`]: the store on one SQLite file in WAL mode.
//!
//! Writes go through the one write connection ([`writer`]): run by the caller when nobody
//! else is writing, otherwise queued for the writer thread, which batches them into shared
//! commits. Store reads run on the caller's thread on a small pool of read connections, so
//! they never wait behind writes (WAL readers see the last committed state); the tools'
//! `read_with` closures run on tokio's blocking threads.

mod approvals;
pub mod check;
pub mod copy;
pub mod dump;
mod exec;
pub mod files;
pub mod migrate;
mod records;
pub mod transfer;
mod wal;
mod writer;

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, ErrorCode, OpenFlags};
use tokio::sync::{broadcast, oneshot};

use super::sql;
use super::{
    BoxFuture, Listener, Namespace, Notices, Store, StoreCall, StoreError, StoreNotice, StoreOutput,
};
pub(crate) use exec::Conn;
use writer::{Job, Writer};

pub use crate::config::SyncMode;

/// How to open a [`SqliteStore`].
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    pub path: PathBuf,
    pub sync: SyncMode,
    /// The largest page any list returns, whatever `limit` asks for; the rest follows with
    /// the cursor.
    pub max_page_size: usize,
    /// How long a connection waits for a lock held by another process.
    pub busy_timeout: Duration,
    /// Caps the database size in pages (`PRAGMA max_page_count`); for tests of a full disk.
    pub max_page_count: Option<u64>,
}

impl SqliteOptions {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        SqliteOptions {
            path: path.into(),
            sync: SyncMode::Normal,
            max_page_size: 1000,
            busy_timeout: Duration::from_secs(5),
            max_page_count: None,
        }
    }
}

/// Why the store could not be opened. Each message names the file and the problem; the
/// underlying error is the `source` (printed after it by `{:#}`, not repeated in it).
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot create the database directory {dir}")]
    CreateDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot create or open database file {path}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "database file {path} is not writable (read-only file system, immutable file or no \
         permission)"
    )]
    NotWritable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open database {path}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("database {path} is locked by another process (is another callbackd running on it?)")]
    Locked { path: PathBuf },
    #[error("database {path} is not writable")]
    ReadOnly {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("database {path}")]
    Migrate {
        path: PathBuf,
        source: migrate::MigrateError,
    },
    #[error("cannot start the writer thread")]
    Thread(#[source] std::io::Error),
}

/// Read connections kept open between calls.
const MAX_IDLE_READERS: usize = 8;

/// The SQLite store. Cheap to share behind an `Arc`; dropping the last handle lets the
/// writer finish its queue and exit.
pub struct SqliteStore {
    writer: mpsc::Sender<Box<dyn Job>>,
    write: Arc<Writer>,
    /// Whether an uncontended store write may run on the caller's thread (see [`writer`]).
    inline_writes: bool,
    readers: Arc<ReaderPool>,
    events: Arc<Notices>,
    max_page_size: usize,
    /// Stops the checkpoint thread when the store is dropped.
    _checkpointer: wal::Checkpointer,
    /// Last: waits for the writer thread, which ends once `writer` (dropped first) is gone
    /// and its queue is done. Without the wait the process could exit before the write
    /// connection is closed, and a connection closed last is what checkpoints the WAL and
    /// removes it: after a clean stop the next start would recover a WAL of up to 40 MB.
    _writer_thread: JoinOnDrop,
}

/// Joins a thread when dropped.
struct JoinOnDrop(Option<std::thread::JoinHandle<()>>);

impl Drop for JoinOnDrop {
    fn drop(&mut self) {
        if let Some(thread) = self.0.take() {
            let _ = thread.join();
        }
    }
}

impl SqliteStore {
    /// Opens (creating with mode 0600 if needed) and migrates the database, and starts the
    /// writer thread.
    pub fn open(opts: &SqliteOptions) -> Result<SqliteStore, OpenError> {
        let path = opts.path.clone();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| OpenError::CreateDir {
                dir: dir.to_path_buf(),
                source,
            })?;
        }
        // Create the file ourselves so it is private from the first byte; SQLite gives the
        // -wal and -shm files the database file's permissions.
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(|source| {
                let path = path.clone();
                // EROFS, EACCES, or EPERM (what an immutable file gives even root).
                if source.kind() == std::io::ErrorKind::PermissionDenied
                    || source.kind() == std::io::ErrorKind::ReadOnlyFilesystem
                    || source.raw_os_error() == Some(1)
                {
                    OpenError::NotWritable { path, source }
                } else {
                    OpenError::Create { path, source }
                }
            })?;
        let mut conn = open_connection(&path, opts).map_err(|e| classify_open(&path, e))?;
        // Retention removes run events; with incremental auto-vacuum the pages they held can
        // be given back to the file system (`PRAGMA incremental_vacuum`, run by each prune
        // batch). It can only be chosen before the first table exists: databases created
        // before this setting keep `auto_vacuum = NONE` (README, "Retention").
        let empty: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .map_err(|e| classify_open(&path, e))?;
        if empty == 0 {
            conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")
                .map_err(|e| classify_open(&path, e))?;
        }
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(|e| classify_open(&path, e))?;
        let sync = match opts.sync {
            SyncMode::Normal => "NORMAL",
            SyncMode::Full => "FULL",
        };
        conn.pragma_update(None, "synchronous", sync)
            .map_err(|e| classify_open(&path, e))?;
        migrate::migrate(&mut conn).map_err(|source| match source {
            migrate::MigrateError::Failed { source: e, .. } | migrate::MigrateError::Version(e)
                if is_code(&e, ErrorCode::DatabaseBusy)
                    || is_code(&e, ErrorCode::DatabaseLocked) =>
            {
                OpenError::Locked { path: path.clone() }
            }
            source => OpenError::Migrate {
                path: path.clone(),
                source,
            },
        })?;
        // A write probe: a read-only file or directory fails here, at startup, rather than
        // on the first write of a run.
        conn.execute_batch("BEGIN IMMEDIATE; COMMIT")
            .map_err(|e| classify_open(&path, e))?;

        // Checkpoints run on a thread of their own (see wal.rs); the write connection's own
        // automatic checkpoint, at a higher threshold, finishes them and restarts the WAL.
        conn.pragma_update(None, "wal_autocheckpoint", wal::BACKSTOP_PAGES)
            .map_err(|e| classify_open(&path, e))?;
        let signal = Arc::new(wal::Signal::default());
        let checkpoint_conn = open_connection(&path, opts).map_err(|e| classify_open(&path, e))?;
        let checkpointer =
            wal::Checkpointer::start(checkpoint_conn, signal.clone()).map_err(OpenError::Thread)?;

        let (tx, rx) = mpsc::channel();
        let write = Arc::new(Writer::new(conn, signal));
        let thread_write = write.clone();
        let writer_thread = std::thread::Builder::new()
            .name("callbackd-writer".into())
            .spawn(move || writer::run(thread_write, rx))
            .map_err(OpenError::Thread)?;
        let events = Arc::new(Notices::new(1024));
        Ok(SqliteStore {
            writer: tx,
            write,
            inline_writes: opts.sync == SyncMode::Normal,
            readers: Arc::new(ReaderPool {
                path,
                opts: opts.clone(),
                idle: Mutex::new(Vec::new()),
            }),
            events,
            max_page_size: opts.max_page_size.max(1),
            _checkpointer: checkpointer,
            _writer_thread: JoinOnDrop(Some(writer_thread)),
        })
    }

    /// Runs `f` on the writer thread inside a transaction (shared with other writes), and
    /// returns its result once committed. For the tool-side data ([`memory`]).
    async fn write_with<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let (reply, rx) = oneshot::channel();
        self.submit(Box::new(FnJob {
            f: Some(f),
            value: None,
            reply: Some(reply),
        }))?;
        rx.await
            .map_err(|_| StoreError::Unavailable("the store writer stopped".into()))?
    }

    /// Runs `f` on a read connection on a blocking thread.
    async fn read_with<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let pool = self.readers.clone();
        tokio::task::spawn_blocking(move || pool.with(f))
            .await
            .map_err(|e| StoreError::Internal(format!("read task failed: {e}")))?
    }

    /// The backend's announcer (and the outbox's composer it keeps).
    pub(crate) fn notices(&self) -> &Notices {
        &self.events
    }

    /// Runs a shared SQL operation ([`sql`]) inside a write transaction on the writer
    /// thread.
    pub(crate) fn sql_write<T, F>(&self, f: F) -> BoxFuture<'_, Result<T, StoreError>>
    where
        T: Send + 'static,
        F: for<'d, 'c> FnOnce(&'d Conn<'c>) -> sql::LocalFuture<'d, Result<T, StoreError>>
            + Send
            + 'static,
    {
        Box::pin(self.write_with(move |conn| sql::ready(f(&Conn(conn)))))
    }

    /// Runs a shared SQL operation on a read connection on a blocking thread.
    pub(crate) fn sql_read<T, F>(&self, f: F) -> BoxFuture<'_, Result<T, StoreError>>
    where
        T: Send + 'static,
        F: for<'d, 'c> FnOnce(&'d Conn<'c>) -> sql::LocalFuture<'d, Result<T, StoreError>>
            + Send
            + 'static,
    {
        Box::pin(self.read_with(move |conn| sql::ready(f(&Conn(conn)))))
    }

    fn submit(&self, job: Box<dyn Job>) -> Result<(), StoreError> {
        self.write.enqueued();
        self.writer.send(job).map_err(|_| {
            self.write.not_enqueued();
            StoreError::Unavailable("the store writer stopped".into())
        })
    }
}

impl Store for SqliteStore {
    fn call(
        &self,
        ns: &Namespace,
        call: StoreCall,
    ) -> BoxFuture<'_, Result<StoreOutput, StoreError>> {
        let ns = ns.clone();
        let call = call.clamp(self.max_page_size);
        Box::pin(async move {
            if !call.is_write() {
                // On this thread: a store read is an indexed lookup or one page, tens to a
                // few hundred microseconds with the database in the page cache, less than
                // the two thread hand-offs of spawn_blocking cost (measured; see writer.rs).
                return self
                    .readers
                    .with(|conn| sql::ready(sql::call::read(&Conn(conn), ns.as_str(), &call)));
            }
            let (reply, rx) = oneshot::channel();
            let job: Box<dyn Job> = Box::new(CallJob {
                ns,
                call: Some(call),
                output: None,
                notice: None,
                reply: Some(reply),
                events: self.events.clone(),
            });
            let queued = if self.inline_writes {
                self.write.try_inline(job).err()
            } else {
                Some(job)
            };
            if let Some(job) = queued {
                self.submit(job)?;
            }
            rx.await
                .map_err(|_| StoreError::Unavailable("the store writer stopped".into()))?
        })
    }

    fn subscribe(&self) -> broadcast::Receiver<StoreNotice> {
        self.events.subscribe()
    }

    fn listen(&self, listener: Listener) {
        self.events.listen(listener);
    }

    crate::store::record_stores!();
}

/// A store call on the writer thread.
struct CallJob {
    ns: Namespace,
    call: Option<StoreCall>,
    output: Option<StoreOutput>,
    /// What the write announces once committed (an append, a run's end).
    notice: Option<StoreNotice>,
    reply: Option<oneshot::Sender<Result<StoreOutput, StoreError>>>,
    events: Arc<Notices>,
}

impl Job for CallJob {
    fn run(&mut self, conn: &Connection) -> Result<(), StoreError> {
        let call = self
            .call
            .take()
            .ok_or_else(|| StoreError::Internal("job ran twice".into()))?;
        let (output, notice) = sql::ready(sql::call::write(
            &Conn(conn),
            &self.ns,
            &call,
            self.events.outbox(),
        ))?;
        self.output = Some(output);
        self.notice = notice;
        Ok(())
    }

    fn finish(mut self: Box<Self>, committed: Result<(), StoreError>) {
        let result = committed.map(|()| self.output.take().flatten());
        if result.is_ok() {
            if let Some(notice) = self.notice.take() {
                self.events.send(notice);
            }
        }
        if let Some(reply) = self.reply.take() {
            let _ = reply.send(result);
        }
    }
}

/// A closure on the writer thread ([`SqliteStore::write_with`]).
struct FnJob<T, F> {
    f: Option<F>,
    value: Option<T>,
    reply: Option<oneshot::Sender<Result<T, StoreError>>>,
}

impl<T, F> Job for FnJob<T, F>
where
    T: Send,
    F: FnOnce(&Connection) -> Result<T, StoreError> + Send,
{
    fn run(&mut self, conn: &Connection) -> Result<(), StoreError> {
        let f = self
            .f
            .take()
            .ok_or_else(|| StoreError::Internal("job ran twice".into()))?;
        self.value = Some(f(conn)?);
        Ok(())
    }

    fn finish(mut self: Box<Self>, committed: Result<(), StoreError>) {
        let result = committed.and_then(|()| {
            self.value
                .take()
                .ok_or_else(|| StoreError::Internal("job has no result".into()))
        });
        if let Some(reply) = self.reply.take() {
            let _ = reply.send(result);
        }
    }
}

/// Read connections, opened on demand and kept for reuse (with their statement caches).
struct ReaderPool {
    path: PathBuf,
    opts: SqliteOptions,
    idle: Mutex<Vec<Connection>>,
}

impl ReaderPool {
    fn with<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let pooled = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let conn = match pooled {
            Some(conn) => conn,
            None => {
                let conn = open_connection(&self.path, &self.opts)?;
                conn.pragma_update(None, "query_only", true)?;
                conn
            }
        };
        let result = f(&conn);
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE_READERS {
            idle.push(conn);
        }
        result
    }
}

fn open_connection(path: &Path, opts: &SqliteOptions) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    )?;
    conn.busy_timeout(opts.busy_timeout)?;
    // Query plans must not depend on bound values. Otherwise SQLite (built with STAT4) marks
    // statements whose plan a binding might change, and since rusqlite's statement cache
    // clears the bindings of every statement it takes back, such statements are re-prepared
    // on every use: the append's MAX(seq) query was, a quarter of an append's CPU.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    conn.set_prepared_statement_cache_capacity(64);
    if let Some(pages) = opts.max_page_count {
        conn.pragma_update(
            None,
            "max_page_count",
            i64::try_from(pages).unwrap_or(i64::MAX),
        )?;
    }
    Ok(conn)
}

fn classify_open(path: &Path, e: rusqlite::Error) -> OpenError {
    let path = path.to_path_buf();
    if is_code(&e, ErrorCode::DatabaseBusy) || is_code(&e, ErrorCode::DatabaseLocked) {
        OpenError::Locked { path }
    } else if is_code(&e, ErrorCode::ReadOnly) || is_code(&e, ErrorCode::CannotOpen) {
        OpenError::ReadOnly { path, source: e }
    } else {
        OpenError::Open { path, source: e }
    }
}

fn is_code(e: &rusqlite::Error, code: ErrorCode) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == code)
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        match &e {
            rusqlite::Error::SqliteFailure(f, _) => match f.code {
                ErrorCode::DiskFull => StoreError::Full(e.to_string()),
                ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => {
                    StoreError::DataLoss(format!("the database is corrupted: {e}"))
                }
                ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => {
                    StoreError::Unavailable(format!("the database is locked: {e}"))
                }
                _ => StoreError::Internal(e.to_string()),
            },
            _ => StoreError::Internal(e.to_string()),
        }
    }
}

/// Stored documents read back through the JSON guard ([`JsonText::parse`]): text another
/// program wrote into the file is refused rather than passed on as JSON.
impl rusqlite::types::FromSql for crate::store::JsonText {
    fn column_result(value: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        let text = value.as_str()?.to_string();
        crate::store::JsonText::parse(text)
            .map_err(|e| rusqlite::types::FromSqlError::Other(Box::new(e)))
    }
}

impl rusqlite::ToSql for crate::store::JsonText {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(rusqlite::types::ToSqlOutput::Borrowed(
            rusqlite::types::ValueRef::Text(self.as_str().as_bytes()),
        ))
    }
}

#[cfg(test)]
mod tests;

sql::memory::impl_tool_data!(SqliteStore);
