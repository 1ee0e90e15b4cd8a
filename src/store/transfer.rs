//! `callbackd copy-store`: everything one store holds, copied into another, whatever the
//! two backends: agents, runs, run events (with their seqs and timestamps), checkpoint
//! blobs (with their checksums), the tools' data and the run API's records. Tables are read in primary-key order,
//! in batches, and written one batch per transaction; the target must be empty, and once
//! the copy is done the counts of both sides and the target's blobs (against their
//! checksums) are verified. A source blob that fails its checksum stops the copy.

use std::io::{IsTerminal, Write};

use super::{BoxFuture, JsonText};

/// The tables, in copy order (parents first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    Agents,
    Runs,
    RunEvents,
    Checkpoints,
    MemoryNotes,
    ToolCalls,
    EventMeta,
    RunExpiry,
    Approvals,
    RunInputs,
    SessionForks,
    AgUiThreads,
    WebhookOutbox,
}

impl Table {
    pub const ALL: [Table; 13] = [
        Table::Agents,
        Table::Runs,
        Table::RunEvents,
        Table::Checkpoints,
        Table::MemoryNotes,
        Table::ToolCalls,
        Table::EventMeta,
        Table::RunExpiry,
        Table::Approvals,
        Table::RunInputs,
        Table::SessionForks,
        Table::AgUiThreads,
        Table::WebhookOutbox,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Table::Agents => "agents",
            Table::Runs => "runs",
            Table::RunEvents => "run_events",
            Table::Checkpoints => "checkpoints",
            Table::MemoryNotes => "memory_notes",
            Table::ToolCalls => "tool_calls",
            Table::EventMeta => "event_meta",
            Table::RunExpiry => "run_expiry",
            Table::Approvals => "approvals",
            Table::RunInputs => "run_inputs",
            Table::SessionForks => "session_forks",
            Table::AgUiThreads => "ag_ui_threads",
            Table::WebhookOutbox => "webhook_outbox",
        }
    }
}

/// One stored row, as every backend stores it.
#[derive(Debug, Clone, PartialEq)]
pub enum Row {
    Agent {
        ns: String,
        agent_id: String,
        cwd: String,
        updated_at: f64,
        doc: JsonText,
    },
    Run {
        ns: String,
        agent_id: String,
        run_id: String,
        turn_number: f64,
        doc: JsonText,
    },
    Event {
        ns: String,
        run_id: String,
        seq: i64,
        event_type: String,
        payload: JsonText,
        payload_ref: Option<String>,
        idempotency_key: Option<String>,
        created_at: i64,
    },
    Checkpoint {
        ns: String,
        agent_id: String,
        blob_id: String,
        data: Vec<u8>,
        crc32: i64,
    },
    Note {
        ns: String,
        agent_id: String,
        key: String,
        value: String,
        updated_at: i64,
    },
    ToolCall {
        id: i64,
        ns: String,
        agent_id: String,
        run_id: Option<String>,
        tool_call_id: Option<String>,
        tool: String,
        started_at: i64,
        ended_at: Option<i64>,
        outcome: String,
        cut_off: bool,
        /// Held for approval: the wait for the person (ms).
        waited_ms: Option<i64>,
        /// What the tool ran with when a person changed it (JSON text).
        arguments: Option<String>,
        /// What the tool returned, its own JSON (text).
        result: Option<String>,
    },
    EventMeta {
        ns: String,
        run_id: String,
        seq: i64,
        delta: i64,
    },
    RunExpiry {
        ns: String,
        run_id: String,
        expired_through: i64,
        pruned_at: i64,
    },
    Approval {
        id: String,
        ns: String,
        agent_id: String,
        run_id: Option<String>,
        tool: String,
        tool_call_id: Option<String>,
        /// The call's arguments, JSON text.
        args: JsonText,
        created_at: i64,
        expires_at: i64,
        state: String,
        decided_by: Option<String>,
        decided_at: Option<i64>,
        reason: Option<String>,
        /// The daemon holding the call while pending, and until when it vouches for it:
        /// copied as they are, so a pending approval whose daemon is gone is cancelled by
        /// the target's sweep like any other.
        owner: String,
        lease_until: i64,
        /// What a person edited the arguments to (JSON text), if they did.
        approved_args: Option<String>,
        confirm: bool,
    },
    RunInput {
        ns: String,
        run_id: String,
        text: String,
    },
    Fork {
        ns: String,
        agent_id: String,
        source_agent_id: String,
        source_run_id: String,
        at: String,
        model: String,
        /// The tool names, JSON text.
        tools: String,
        created_at: i64,
    },
    /// An AG-UI thread's alias of its session.
    Thread {
        ns: String,
        thread_id: String,
        agent_id: String,
        created_at: i64,
    },
    /// A webhook delivery (its claim is not copied: the target's daemons claim afresh).
    Webhook {
        id: String,
        url: String,
        ns: String,
        kind: String,
        run_id: Option<String>,
        body: String,
        created_at: i64,
        state: String,
        attempts: i64,
        next_at: i64,
        last_status: Option<i64>,
        last_error: Option<String>,
        last_at: Option<i64>,
    },
}

/// Where a batch continues: the primary key of the last row read.
#[derive(Debug, Clone, PartialEq)]
pub enum Key {
    /// Text columns of the key (`ns, agent_id[, run_id | blob_id | key]`).
    Text(Vec<String>),
    /// `(ns, run_id, seq)` of an event (or its `event_meta`).
    Event(String, String, i64),
    /// A tool call record's id.
    Id(i64),
}

impl Row {
    pub fn key(&self) -> Key {
        match self {
            Row::Agent { ns, agent_id, .. } => Key::Text(vec![ns.clone(), agent_id.clone()]),
            Row::Run {
                ns,
                agent_id,
                run_id,
                ..
            } => Key::Text(vec![ns.clone(), agent_id.clone(), run_id.clone()]),
            Row::Event {
                ns, run_id, seq, ..
            } => Key::Event(ns.clone(), run_id.clone(), *seq),
            Row::Checkpoint {
                ns,
                agent_id,
                blob_id,
                ..
            } => Key::Text(vec![ns.clone(), agent_id.clone(), blob_id.clone()]),
            Row::Note {
                ns, agent_id, key, ..
            } => Key::Text(vec![ns.clone(), agent_id.clone(), key.clone()]),
            Row::ToolCall { id, .. } => Key::Id(*id),
            Row::EventMeta {
                ns, run_id, seq, ..
            } => Key::Event(ns.clone(), run_id.clone(), *seq),
            Row::RunExpiry { ns, run_id, .. } => Key::Text(vec![ns.clone(), run_id.clone()]),
            Row::Approval { id, .. } => Key::Text(vec![id.clone()]),
            Row::RunInput { ns, run_id, .. } => Key::Text(vec![ns.clone(), run_id.clone()]),
            Row::Fork { ns, agent_id, .. } => Key::Text(vec![ns.clone(), agent_id.clone()]),
            Row::Thread { ns, thread_id, .. } => Key::Text(vec![ns.clone(), thread_id.clone()]),
            Row::Webhook { id, url, .. } => Key::Text(vec![id.clone(), url.clone()]),
        }
    }
}

/// Why a copy failed.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    #[error("{0}")]
    Store(String),
    #[error(
        "the target {target} is not empty ({what}); copy-store only fills an empty store, \
         so that nothing is merged or overwritten"
    )]
    NotEmpty { target: String, what: String },
    #[error("checkpoint blob {blob_id} of agent {agent_id} (namespace {ns}) in {side} fails its checksum; nothing more was copied")]
    CorruptBlob {
        side: &'static str,
        ns: String,
        agent_id: String,
        blob_id: String,
    },
    #[error("after the copy, {table} holds {in_target} rows in the target but {in_source} in the source")]
    CountMismatch {
        table: &'static str,
        in_source: u64,
        in_target: u64,
    },
    #[error("a document in {table} is not valid JSON: {detail}")]
    NotJson { table: &'static str, detail: String },
}

/// One side of a copy, implemented by each backend next to its tables.
pub trait Transfer: Send {
    /// The side as a person names it (file or URL without password).
    fn describe(&self) -> String;
    fn count(&mut self, table: Table) -> BoxFuture<'_, Result<u64, TransferError>>;
    /// Up to `limit` rows of `table` after `after`, in key order.
    fn read<'a>(
        &'a mut self,
        table: Table,
        after: Option<&'a Key>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<Row>, TransferError>>;
    /// Writes `rows` in one transaction.
    fn write<'a>(&'a mut self, rows: &'a [Row]) -> BoxFuture<'a, Result<(), TransferError>>;
    /// Whatever the backend derives from the copied rows (PostgreSQL: each run's seq
    /// counter, the tool call id sequence), once every row is in.
    fn finish(&mut self) -> BoxFuture<'_, Result<(), TransferError>>;
}

/// What a copy did, per table.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CopyReport {
    pub rows: Vec<(&'static str, u64)>,
    pub blobs_verified: u64,
}

/// Copies everything from `from` into the empty `to`, `batch` rows per transaction, and
/// verifies the result. Progress goes to stderr (one updating line on a terminal).
pub async fn copy_store(
    from: &mut dyn Transfer,
    to: &mut dyn Transfer,
    batch: usize,
) -> Result<CopyReport, TransferError> {
    let batch = batch.max(1);
    let mut not_empty = Vec::new();
    for table in Table::ALL {
        let n = to.count(table).await?;
        if n > 0 {
            not_empty.push(format!("{n} {}", table.name()));
        }
    }
    if !not_empty.is_empty() {
        return Err(TransferError::NotEmpty {
            target: to.describe(),
            what: not_empty.join(", "),
        });
    }
    let progress = Progress::new();
    let mut report = CopyReport::default();
    for table in Table::ALL {
        let total = from.count(table).await?;
        let mut done = 0u64;
        let mut after: Option<Key> = None;
        loop {
            let rows = from.read(table, after.as_ref(), batch).await?;
            let Some(last) = rows.last() else { break };
            after = Some(last.key());
            for row in &rows {
                verify_blob(row, "the source")?;
            }
            to.write(&rows).await?;
            done += rows.len() as u64;
            progress.update(table, done, total);
            if rows.len() < batch {
                break;
            }
        }
        progress.done(table, done);
        report.rows.push((table.name(), done));
    }
    to.finish().await?;
    // Verify: the same number of rows on both sides, every target blob intact.
    for (table, (name, copied)) in Table::ALL.into_iter().zip(report.rows.iter()) {
        let (source, target) = (from.count(table).await?, to.count(table).await?);
        if source != target || target != *copied {
            return Err(TransferError::CountMismatch {
                table: name,
                in_source: source,
                in_target: target,
            });
        }
    }
    let mut after: Option<Key> = None;
    loop {
        let rows = to.read(Table::Checkpoints, after.as_ref(), batch).await?;
        let Some(last) = rows.last() else { break };
        after = Some(last.key());
        for row in &rows {
            verify_blob(row, "the target")?;
            report.blobs_verified += 1;
        }
    }
    Ok(report)
}

fn verify_blob(row: &Row, side: &'static str) -> Result<(), TransferError> {
    if let Row::Checkpoint {
        ns,
        agent_id,
        blob_id,
        data,
        crc32,
    } = row
    {
        if super::blob::checksum(data) != *crc32 {
            return Err(TransferError::CorruptBlob {
                side,
                ns: ns.clone(),
                agent_id: agent_id.clone(),
                blob_id: blob_id.clone(),
            });
        }
    }
    Ok(())
}

/// Stored text that must be JSON (the JSON guard of every document copied).
pub fn json(table: &'static str, text: String) -> Result<JsonText, TransferError> {
    JsonText::parse(text).map_err(|e| TransferError::NotJson {
        table,
        detail: e.to_string(),
    })
}

/// Progress lines on stderr: one line rewritten in place on a terminal, a line per table
/// otherwise.
struct Progress {
    tty: bool,
}

impl Progress {
    fn new() -> Self {
        Progress {
            tty: std::io::stderr().is_terminal(),
        }
    }

    fn update(&self, table: Table, done: u64, total: u64) {
        if self.tty {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\rcopying {}: {done}/{total}\x1b[K", table.name());
            let _ = err.flush();
        }
    }

    fn done(&self, table: Table, done: u64) {
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[K");
        }
        let _ = writeln!(err, "copied {done} {}", table.name());
    }
}
