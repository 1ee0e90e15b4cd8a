//! [`Transfer`] on a SQLite file, for `callbackd copy-store`.

use std::path::{Path, PathBuf};

use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags};

use super::{SqliteOptions, SqliteStore};
use crate::store::transfer::{json, Key, Row, Table, Transfer, TransferError};
use crate::store::{sql, BoxFuture};

/// One side of a copy: a connection to the file.
pub struct SqliteTransfer {
    conn: Connection,
    path: PathBuf,
}

impl SqliteTransfer {
    /// An existing database, read-only.
    pub fn source(path: &Path) -> Result<Self, TransferError> {
        if !path.exists() {
            return Err(TransferError::Store(format!(
                "database {} does not exist",
                path.display()
            )));
        }
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| err(path, e))?;
        Ok(SqliteTransfer {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// A database created (or opened) and migrated as the daemon would.
    pub fn target(path: &Path) -> Result<Self, TransferError> {
        drop(
            SqliteStore::open(&SqliteOptions::new(path))
                .map_err(|e| TransferError::Store(format!("{e:#}")))?,
        );
        let conn = Connection::open(path).map_err(|e| err(path, e))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(|e| err(path, e))?;
        Ok(SqliteTransfer {
            conn,
            path: path.to_path_buf(),
        })
    }

    fn read_now(
        &self,
        table: Table,
        after: Option<&Key>,
        limit: usize,
    ) -> rusqlite::Result<Vec<Row>> {
        let (columns, key) = sql::transfer::columns(table);
        let mut params: Vec<Value> = match after {
            None => Vec::new(),
            Some(Key::Text(parts)) => parts.iter().cloned().map(Value::Text).collect(),
            Some(Key::Event(ns, run, seq)) => {
                vec![
                    Value::Text(ns.clone()),
                    Value::Text(run.clone()),
                    Value::Integer(*seq),
                ]
            }
            Some(Key::Id(id)) => vec![Value::Integer(*id)],
        };
        let condition = if params.is_empty() {
            String::new()
        } else {
            let marks = vec!["?"; params.len()].join(", ");
            format!("WHERE ({key}) > ({marks})")
        };
        params.push(Value::Integer(i64::try_from(limit).unwrap_or(i64::MAX)));
        let sql = format!(
            "SELECT {columns} FROM {} {condition} ORDER BY {key} LIMIT ?",
            table.name()
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let doc = |i: usize| -> rusqlite::Result<String> { r.get(i) };
            out.push(match table {
                Table::Agents => Row::Agent {
                    ns: r.get(0)?,
                    agent_id: r.get(1)?,
                    cwd: r.get(2)?,
                    updated_at: r.get(3)?,
                    doc: json_or_text(table, doc(4)?)?,
                },
                Table::Runs => Row::Run {
                    ns: r.get(0)?,
                    agent_id: r.get(1)?,
                    run_id: r.get(2)?,
                    turn_number: r.get(3)?,
                    doc: json_or_text(table, doc(4)?)?,
                },
                Table::RunEvents => Row::Event {
                    ns: r.get(0)?,
                    run_id: r.get(1)?,
                    seq: r.get(2)?,
                    event_type: r.get(3)?,
                    payload: json_or_text(table, doc(4)?)?,
                    payload_ref: r.get(5)?,
                    idempotency_key: r.get(6)?,
                    created_at: r.get(7)?,
                },
                Table::Checkpoints => Row::Checkpoint {
                    ns: r.get(0)?,
                    agent_id: r.get(1)?,
                    blob_id: r.get(2)?,
                    data: r.get(3)?,
                    crc32: r.get(4)?,
                },
                Table::MemoryNotes => Row::Note {
                    ns: r.get(0)?,
                    agent_id: r.get(1)?,
                    key: r.get(2)?,
                    value: r.get(3)?,
                    updated_at: r.get(4)?,
                },
                Table::ToolCalls => Row::ToolCall {
                    id: r.get(0)?,
                    ns: r.get(1)?,
                    agent_id: r.get(2)?,
                    run_id: r.get(3)?,
                    tool_call_id: r.get(4)?,
                    tool: r.get(5)?,
                    started_at: r.get(6)?,
                    ended_at: r.get(7)?,
                    outcome: r.get(8)?,
                    cut_off: r.get(9)?,
                },
                Table::EventMeta => Row::EventMeta {
                    ns: r.get(0)?,
                    run_id: r.get(1)?,
                    seq: r.get(2)?,
                    delta: r.get(3)?,
                },
                Table::RunExpiry => Row::RunExpiry {
                    ns: r.get(0)?,
                    run_id: r.get(1)?,
                    expired_through: r.get(2)?,
                    pruned_at: r.get(3)?,
                },
                Table::Approvals => Row::Approval {
                    id: r.get(0)?,
                    ns: r.get(1)?,
                    agent_id: r.get(2)?,
                    run_id: r.get(3)?,
                    tool: r.get(4)?,
                    tool_call_id: r.get(5)?,
                    args: json_or_text(table, doc(6)?)?,
                    created_at: r.get(7)?,
                    expires_at: r.get(8)?,
                    state: r.get(9)?,
                    decided_by: r.get(10)?,
                    decided_at: r.get(11)?,
                    reason: r.get(12)?,
                },
                Table::RunInputs => Row::RunInput {
                    ns: r.get(0)?,
                    run_id: r.get(1)?,
                    text: r.get(2)?,
                },
                Table::SessionForks => Row::Fork {
                    ns: r.get(0)?,
                    agent_id: r.get(1)?,
                    source_agent_id: r.get(2)?,
                    source_run_id: r.get(3)?,
                    at: r.get(4)?,
                    model: r.get(5)?,
                    tools: r.get(6)?,
                    created_at: r.get(7)?,
                },
            });
        }
        Ok(out)
    }

    fn write_now(&mut self, rows: &[Row]) -> rusqlite::Result<()> {
        let tx = self.conn.transaction()?;
        for row in rows {
            match row {
                Row::Agent { ns, agent_id, cwd, updated_at, doc } => tx
                    .prepare_cached("INSERT INTO agents (ns, agent_id, cwd, updated_at, doc) VALUES (?1, ?2, ?3, ?4, ?5)")?
                    .execute(rusqlite::params![ns, agent_id, cwd, updated_at, doc.as_str()])?,
                Row::Run { ns, agent_id, run_id, turn_number, doc } => tx
                    .prepare_cached("INSERT INTO runs (ns, agent_id, run_id, turn_number, doc) VALUES (?1, ?2, ?3, ?4, ?5)")?
                    .execute(rusqlite::params![ns, agent_id, run_id, turn_number, doc.as_str()])?,
                Row::Event { ns, run_id, seq, event_type, payload, payload_ref, idempotency_key, created_at } => tx
                    .prepare_cached("INSERT INTO run_events (ns, run_id, seq, event_type, payload, payload_ref, idempotency_key, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")?
                    .execute(rusqlite::params![ns, run_id, seq, event_type, payload.as_str(), payload_ref, idempotency_key, created_at])?,
                Row::Checkpoint { ns, agent_id, blob_id, data, crc32 } => tx
                    .prepare_cached("INSERT INTO checkpoints (ns, agent_id, blob_id, data, crc32) VALUES (?1, ?2, ?3, ?4, ?5)")?
                    .execute(rusqlite::params![ns, agent_id, blob_id, data, crc32])?,
                Row::Note { ns, agent_id, key, value, updated_at } => tx
                    .prepare_cached("INSERT INTO memory_notes (ns, agent_id, key, value, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)")?
                    .execute(rusqlite::params![ns, agent_id, key, value, updated_at])?,
                Row::ToolCall { id, ns, agent_id, run_id, tool_call_id, tool, started_at, ended_at, outcome, cut_off } => tx
                    .prepare_cached("INSERT INTO tool_calls (id, ns, agent_id, run_id, tool_call_id, tool, started_at, ended_at, outcome, cut_off) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)")?
                    .execute(rusqlite::params![id, ns, agent_id, run_id, tool_call_id, tool, started_at, ended_at, outcome, cut_off])?,
                Row::EventMeta { ns, run_id, seq, delta } => tx
                    .prepare_cached("INSERT INTO event_meta (ns, run_id, seq, delta) VALUES (?1, ?2, ?3, ?4)")?
                    .execute(rusqlite::params![ns, run_id, seq, delta])?,
                Row::RunExpiry { ns, run_id, expired_through, pruned_at } => tx
                    .prepare_cached("INSERT INTO run_expiry (ns, run_id, expired_through, pruned_at) VALUES (?1, ?2, ?3, ?4)")?
                    .execute(rusqlite::params![ns, run_id, expired_through, pruned_at])?,
                Row::Approval { id, ns, agent_id, run_id, tool, tool_call_id, args, created_at, expires_at, state, decided_by, decided_at, reason } => tx
                    .prepare_cached("INSERT INTO approvals (id, ns, agent_id, run_id, tool, tool_call_id, args, created_at, expires_at, state, decided_by, decided_at, reason) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)")?
                    .execute(rusqlite::params![id, ns, agent_id, run_id, tool, tool_call_id, args.as_str(), created_at, expires_at, state, decided_by, decided_at, reason])?,
                Row::RunInput { ns, run_id, text } => tx
                    .prepare_cached("INSERT INTO run_inputs (ns, run_id, text) VALUES (?1, ?2, ?3)")?
                    .execute(rusqlite::params![ns, run_id, text])?,
                Row::Fork { ns, agent_id, source_agent_id, source_run_id, at, model, tools, created_at } => tx
                    .prepare_cached("INSERT INTO session_forks (ns, agent_id, source_agent_id, source_run_id, at, model, tools, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")?
                    .execute(rusqlite::params![ns, agent_id, source_agent_id, source_run_id, at, model, tools, created_at])?,
            };
        }
        tx.commit()
    }
}

/// A stored document through the JSON guard; a failure is reported as the copy's error.
fn json_or_text(table: Table, text: String) -> rusqlite::Result<crate::store::JsonText> {
    json(table.name(), text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(4, rusqlite::types::Type::Text, Box::new(e))
    })
}

fn err(path: &Path, e: rusqlite::Error) -> TransferError {
    match e {
        rusqlite::Error::FromSqlConversionFailure(_, _, inner) => {
            match inner.downcast::<TransferError>() {
                Ok(t) => *t,
                Err(other) => TransferError::Store(format!("database {}: {other}", path.display())),
            }
        }
        e => TransferError::Store(format!("database {}: {e}", path.display())),
    }
}

impl Transfer for SqliteTransfer {
    fn describe(&self) -> String {
        format!("database {}", self.path.display())
    }

    fn count(&mut self, table: Table) -> BoxFuture<'_, Result<u64, TransferError>> {
        let n = self
            .conn
            .query_row(&format!("SELECT count(*) FROM {}", table.name()), [], |r| {
                r.get::<_, i64>(0)
            })
            .map_err(|e| err(&self.path, e));
        Box::pin(async move { Ok(u64::try_from(n?).unwrap_or(0)) })
    }

    fn read<'a>(
        &'a mut self,
        table: Table,
        after: Option<&'a Key>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<Row>, TransferError>> {
        let rows = self
            .read_now(table, after, limit)
            .map_err(|e| err(&self.path, e));
        Box::pin(async move { rows })
    }

    fn write<'a>(&'a mut self, rows: &'a [Row]) -> BoxFuture<'a, Result<(), TransferError>> {
        let done = self.write_now(rows).map_err(|e| err(&self.path, e));
        Box::pin(async move { done })
    }

    fn finish(&mut self) -> BoxFuture<'_, Result<(), TransferError>> {
        // Seqs are max(seq) + 1 here: nothing to derive.
        Box::pin(async { Ok(()) })
    }
}
