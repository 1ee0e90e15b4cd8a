//! Reading a namespace out whole and loading one in whole (`callbackd export` / `import`).
//!
//! The read is one read transaction, so an export of a live database is one consistent
//! snapshot while the daemon goes on writing. The load is one `BEGIN IMMEDIATE` transaction
//! on a connection of its own: it writes everything or nothing, and a daemon serving the same
//! file meanwhile waits for it (up to `store.busy_timeout_ms`) like for any other writer.

use std::collections::BTreeSet;
use std::path::Path;

use rusqlite::types::Type;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension, TransactionBehavior};

use super::{open_connection, Conn, SqliteOptions, SqliteStore};
use crate::store::dump::{Dump, DumpCounts, DumpSink};
use crate::store::sql;
use crate::store::sql::dump::RowError;
use crate::store::StoreError;

/// Why a read-out stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReadError<E> {
    #[error("reading the database")]
    Store(#[from] rusqlite::Error),
    #[error("reading the database")]
    Row(#[source] StoreError),
    #[error(transparent)]
    Sink(E),
}

/// Reads every agent, run, event and checkpoint blob of namespace `ns` of the database at
/// `path` into `sink`, from one snapshot, in the key order of [`sql::dump`] (each run's
/// events together, 1..n, as the bridge numbers them).
pub fn read_all<S: DumpSink>(
    path: &Path,
    ns: &str,
    sink: &mut S,
) -> Result<DumpCounts, ReadError<S::Error>> {
    let mut conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
    let mut counts = DumpCounts::default();
    for read in sql::dump::Read::ALL {
        let mut stmt = tx.prepare(read.sql().sqlite)?;
        let mut rows = stmt.query([ns])?;
        while let Some(r) = rows.next()? {
            sql::dump::hand_on(read, r, sink, &mut counts).map_err(|e| match e {
                RowError::Sink(e) => ReadError::Sink(e),
                // As reading the column as JSON text fails (rusqlite's `FromSql`).
                RowError::NotJson { column, error, .. } => ReadError::Store(
                    rusqlite::Error::FromSqlConversionFailure(column, Type::Text, Box::new(error)),
                ),
                RowError::Row(e) => ReadError::Row(e),
            })?;
        }
    }
    tx.commit()?;
    Ok(counts)
}

/// Why a load wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot open the database")]
    Open(#[from] super::OpenError),
    /// Records whose ids the database already has (the first few of them, and how many).
    #[error(
        "{total} record(s) already exist in the database, e.g. {}; nothing was imported (pass \
         --replace to overwrite them)",
        .examples.join(", ")
    )]
    Exists { examples: Vec<String>, total: usize },
    /// A record that refers to an agent or run neither loaded nor in the database.
    #[error("{0}")]
    Dangling(String),
    #[error("writing the database: {0}")]
    Store(#[from] StoreError),
}

impl From<rusqlite::Error> for LoadError {
    fn from(e: rusqlite::Error) -> Self {
        LoadError::Store(e.into())
    }
}

/// A record that refers to something absent: its index in its list, and what is missing.
pub struct Missing {
    pub index: usize,
    pub what: String,
}

/// Which kind of record a [`Missing`] is.
pub enum MissingIn {
    Runs(Missing),
    Events(Missing),
    Checkpoints(Missing),
}

/// Loads `dump` into namespace `ns` of the database of `opts` (created and migrated if
/// needed), all in one transaction. Records whose ids exist are refused, unless `replace`:
/// then they are overwritten, and a run's events are replaced as a whole. Runs must belong
/// to an agent, events to a run and blobs to an agent of the dump or of the database;
/// `dangling` turns the first that does not into the error to report.
pub fn load(
    opts: &SqliteOptions,
    ns: &str,
    dump: &Dump,
    replace: bool,
    dangling: impl FnOnce(MissingIn) -> String,
) -> Result<DumpCounts, LoadError> {
    // Creates and migrates the file like the daemon would, then lets it go.
    drop(SqliteStore::open(opts)?);
    let mut conn = open_connection(&opts.path, opts)?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;

    if let Some(missing) = first_dangling(&tx, ns, dump)? {
        return Err(LoadError::Dangling(dangling(missing)));
    }
    let existing = existing_ids(&tx, ns, dump)?;
    if !existing.is_empty() && !replace {
        return Err(LoadError::Exists {
            total: existing.len(),
            examples: existing.into_iter().take(5).collect(),
        });
    }
    for a in &dump.agents {
        if replace {
            tx.execute(
                "DELETE FROM agents WHERE ns = ?1 AND agent_id = ?2",
                params![ns, a.agent_id],
            )?;
        }
        sql::ready(sql::agents::create(&Conn(&tx), ns, a))?;
    }
    for r in &dump.runs {
        if replace {
            tx.execute(
                "DELETE FROM runs WHERE ns = ?1 AND agent_id = ?2 AND run_id = ?3",
                params![ns, r.agent_id, r.run_id],
            )?;
        }
        sql::ready(sql::runs::create(&Conn(&tx), ns, r))?;
    }
    if replace {
        let event_runs: BTreeSet<&str> = dump.events.iter().map(|e| e.run_id.as_str()).collect();
        for run_id in event_runs {
            // With the run API's notes on those events (see `cascade`).
            for table in sql::Dialect::Sqlite.event_tables() {
                tx.execute(
                    &format!("DELETE FROM {table} WHERE ns = ?1 AND run_id = ?2"),
                    params![ns, run_id],
                )?;
            }
        }
    }
    {
        let mut insert = tx.prepare(
            "INSERT INTO run_events (ns, run_id, seq, event_type, payload, payload_ref, \
             idempotency_key, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?;
        for e in &dump.events {
            insert.execute(params![
                ns,
                e.run_id,
                i64::try_from(e.seq).unwrap_or(i64::MAX),
                e.event_type,
                e.payload,
                e.payload_ref,
                e.idempotency_key,
                e.created_at_ms
            ])?;
        }
    }
    for c in &dump.checkpoints {
        if replace {
            tx.execute(
                "DELETE FROM checkpoints WHERE ns = ?1 AND agent_id = ?2 AND blob_id = ?3",
                params![ns, c.agent_id, c.blob_id],
            )?;
        }
        sql::ready(sql::checkpoints::create(
            &Conn(&tx),
            ns,
            &c.agent_id,
            &c.blob_id,
            &c.data,
        ))?;
    }
    tx.commit()?;
    Ok(DumpCounts {
        agents: dump.agents.len(),
        runs: dump.runs.len(),
        events: dump.events.len(),
        checkpoints: dump.checkpoints.len(),
    })
}

fn exists(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<bool> {
    Ok(conn
        .prepare_cached(sql)?
        .query_row(params, |_| Ok(()))
        .optional()?
        .is_some())
}

/// The ids of the dump that the database already has, described for a message.
fn existing_ids(conn: &Connection, ns: &str, dump: &Dump) -> rusqlite::Result<Vec<String>> {
    let mut found = Vec::new();
    for a in &dump.agents {
        if exists(
            conn,
            "SELECT 1 FROM agents WHERE ns = ?1 AND agent_id = ?2",
            params![ns, a.agent_id],
        )? {
            found.push(format!("agent {}", a.agent_id));
        }
    }
    for r in &dump.runs {
        if exists(
            conn,
            "SELECT 1 FROM runs WHERE ns = ?1 AND agent_id = ?2 AND run_id = ?3",
            params![ns, r.agent_id, r.run_id],
        )? {
            found.push(format!("run {}", r.run_id));
        }
    }
    let event_runs: BTreeSet<&str> = dump.events.iter().map(|e| e.run_id.as_str()).collect();
    for run_id in event_runs {
        if exists(
            conn,
            "SELECT 1 FROM run_events WHERE ns = ?1 AND run_id = ?2 LIMIT 1",
            params![ns, run_id],
        )? {
            found.push(format!("events of run {run_id}"));
        }
    }
    for c in &dump.checkpoints {
        if exists(
            conn,
            "SELECT 1 FROM checkpoints WHERE ns = ?1 AND agent_id = ?2 AND blob_id = ?3",
            params![ns, c.agent_id, c.blob_id],
        )? {
            found.push(format!(
                "checkpoint blob {} of agent {}",
                c.blob_id, c.agent_id
            ));
        }
    }
    Ok(found)
}

/// The first record whose agent or run is neither in the dump nor in the database.
fn first_dangling(conn: &Connection, ns: &str, dump: &Dump) -> rusqlite::Result<Option<MissingIn>> {
    let agents: BTreeSet<&str> = dump.agents.iter().map(|a| a.agent_id.as_str()).collect();
    let runs: BTreeSet<&str> = dump.runs.iter().map(|r| r.run_id.as_str()).collect();
    let agent_known = |id: &str| -> rusqlite::Result<bool> {
        Ok(agents.contains(id)
            || exists(
                conn,
                "SELECT 1 FROM agents WHERE ns = ?1 AND agent_id = ?2",
                params![ns, id],
            )?)
    };
    for (index, r) in dump.runs.iter().enumerate() {
        if !agent_known(&r.agent_id)? {
            return Ok(Some(MissingIn::Runs(Missing {
                index,
                what: format!("agent {}", r.agent_id),
            })));
        }
    }
    for (index, e) in dump.events.iter().enumerate() {
        if !runs.contains(e.run_id.as_str())
            && !exists(
                conn,
                "SELECT 1 FROM runs WHERE ns = ?1 AND run_id = ?2",
                params![ns, e.run_id],
            )?
        {
            return Ok(Some(MissingIn::Events(Missing {
                index,
                what: format!("run {}", e.run_id),
            })));
        }
    }
    for (index, c) in dump.checkpoints.iter().enumerate() {
        if !agent_known(&c.agent_id)? {
            return Ok(Some(MissingIn::Checkpoints(Missing {
                index,
                what: format!("agent {}", c.agent_id),
            })));
        }
    }
    Ok(None)
}
