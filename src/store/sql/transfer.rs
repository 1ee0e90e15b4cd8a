//! The tables `copy-store` copies, read and written once for both backends: a page of
//! rows after a key, and a batch of rows inserted as they were. What stays with each
//! backend is how it connects and what a copy must derive afterwards (PostgreSQL's seq
//! counters).

use super::{sql, Exec, Value};
use crate::store::transfer::{json, Key, Row, Table, TransferError};
use crate::store::StoreError;

/// The columns of `table` in the order of its [`Row`](crate::store::transfer::Row), and its
/// key (the order pages are read in).
pub fn columns(table: Table) -> (&'static str, &'static str) {
    match table {
        Table::Agents => ("ns, agent_id, cwd, updated_at, doc", "ns, agent_id"),
        Table::Runs => (
            "ns, agent_id, run_id, turn_number, doc",
            "ns, agent_id, run_id",
        ),
        Table::RunEvents => (
            "ns, run_id, seq, event_type, payload, payload_ref, idempotency_key, created_at",
            "ns, run_id, seq",
        ),
        Table::Checkpoints => (
            "ns, agent_id, blob_id, data, crc32",
            "ns, agent_id, blob_id",
        ),
        Table::MemoryNotes => ("ns, agent_id, key, value, updated_at", "ns, agent_id, key"),
        Table::ToolCalls => (
            "id, ns, agent_id, run_id, tool_call_id, tool, started_at, ended_at, outcome, cut_off, \
             waited_ms, arguments, result",
            "id",
        ),
        Table::EventMeta => ("ns, run_id, seq, delta", "ns, run_id, seq"),
        Table::RunExpiry => ("ns, run_id, expired_through, pruned_at", "ns, run_id"),
        Table::RunInputs => ("ns, run_id, text", "ns, run_id"),
        Table::Approvals => (
            "id, ns, agent_id, run_id, tool, tool_call_id, args, created_at, expires_at, state, \
             decided_by, decided_at, reason, owner, lease_until, approved_args, confirm",
            "id",
        ),
        Table::SessionForks => (
            "ns, agent_id, source_agent_id, source_run_id, at, model, tools, created_at",
            "ns, agent_id",
        ),
        Table::AgUiThreads => ("ns, thread_id, agent_id, created_at", "ns, thread_id"),
        Table::WebhookOutbox => (
            "id, url, ns, type, run_id, body, created_at, state, attempts, next_at, last_status, \
             last_error, last_at",
            "id, url",
        ),
    }
}

/// Up to `limit` rows of `table` after `after`, in key order. A stored document that is not
/// JSON is [`TransferError::NotJson`]; a failed statement, `X::Error`.
pub async fn read<X: Exec>(
    x: &X,
    table: Table,
    after: Option<&Key>,
    limit: usize,
) -> Result<Result<Vec<Row>, TransferError>, X::Error> {
    let (columns, key) = columns(table);
    let mut params: Vec<Value> = match after {
        None => Vec::new(),
        Some(Key::Text(parts)) => parts.iter().map(|p| Value::Text(p)).collect(),
        Some(Key::Event(ns, run, seq)) => vec![Value::Text(ns), Value::Text(run), Value::Int(*seq)],
        Some(Key::Id(id)) => vec![Value::Int(*id)],
    };
    let d = X::DIALECT;
    let condition = if params.is_empty() {
        String::new()
    } else {
        let marks: Vec<String> = (1..=params.len()).map(|i| d.param(i)).collect();
        format!("WHERE ({key}) > ({})", marks.join(", "))
    };
    params.push(Value::Int(i64::try_from(limit).unwrap_or(i64::MAX)));
    let sql = format!(
        "SELECT {columns} FROM {} {condition} ORDER BY {key} LIMIT {}",
        table.name(),
        d.param(params.len())
    );
    let mut rows = Vec::new();
    let mut not_json = None;
    x.each_row(&sql, &params, &mut |r| {
        match row(table, r)? {
            Ok(row) => rows.push(row),
            Err(e) => not_json = not_json.take().or(Some(e)),
        }
        Ok(())
    })
    .await?;
    Ok(match not_json {
        Some(e) => Err(e),
        None => Ok(rows),
    })
}

/// One row of `table`, its columns in [`columns`]' order.
fn row(table: Table, r: &dyn super::Row) -> Result<Result<Row, TransferError>, StoreError> {
    let s = |i| r.text(i).map(str::to_string);
    let o = |i| Ok::<_, StoreError>(r.opt_text(i)?.map(str::to_string));
    // A document column through the JSON guard: not JSON ends the row with that error.
    macro_rules! doc {
        ($i:expr) => {
            match json(table.name(), s($i)?) {
                Ok(d) => d,
                Err(e) => return Ok(Err(e)),
            }
        };
    }
    Ok(Ok(match table {
        Table::Agents => Row::Agent {
            ns: s(0)?,
            agent_id: s(1)?,
            cwd: s(2)?,
            updated_at: r.float(3)?,
            doc: doc!(4),
        },
        Table::Runs => Row::Run {
            ns: s(0)?,
            agent_id: s(1)?,
            run_id: s(2)?,
            turn_number: r.float(3)?,
            doc: doc!(4),
        },
        Table::RunEvents => Row::Event {
            ns: s(0)?,
            run_id: s(1)?,
            seq: r.int(2)?,
            event_type: s(3)?,
            payload: doc!(4),
            payload_ref: o(5)?,
            idempotency_key: o(6)?,
            created_at: r.int(7)?,
        },
        Table::Checkpoints => Row::Checkpoint {
            ns: s(0)?,
            agent_id: s(1)?,
            blob_id: s(2)?,
            data: r.bytes(3)?.to_vec(),
            crc32: r.int(4)?,
        },
        Table::MemoryNotes => Row::Note {
            ns: s(0)?,
            agent_id: s(1)?,
            key: s(2)?,
            value: s(3)?,
            updated_at: r.int(4)?,
        },
        Table::ToolCalls => Row::ToolCall {
            id: r.int(0)?,
            ns: s(1)?,
            agent_id: s(2)?,
            run_id: o(3)?,
            tool_call_id: o(4)?,
            tool: s(5)?,
            started_at: r.int(6)?,
            ended_at: r.opt_int(7)?,
            outcome: s(8)?,
            cut_off: r.bool(9)?,
            waited_ms: r.opt_int(10)?,
            arguments: o(11)?,
            result: o(12)?,
        },
        Table::EventMeta => Row::EventMeta {
            ns: s(0)?,
            run_id: s(1)?,
            seq: r.int(2)?,
            delta: r.int(3)?,
        },
        Table::RunExpiry => Row::RunExpiry {
            ns: s(0)?,
            run_id: s(1)?,
            expired_through: r.int(2)?,
            pruned_at: r.int(3)?,
        },
        Table::Approvals => Row::Approval {
            id: s(0)?,
            ns: s(1)?,
            agent_id: s(2)?,
            run_id: o(3)?,
            tool: s(4)?,
            tool_call_id: o(5)?,
            args: doc!(6),
            created_at: r.int(7)?,
            expires_at: r.int(8)?,
            state: s(9)?,
            decided_by: o(10)?,
            decided_at: r.opt_int(11)?,
            reason: o(12)?,
            owner: s(13)?,
            lease_until: r.int(14)?,
            approved_args: o(15)?,
            confirm: r.bool(16)?,
        },
        Table::RunInputs => Row::RunInput {
            ns: s(0)?,
            run_id: s(1)?,
            text: s(2)?,
        },
        Table::SessionForks => Row::Fork {
            ns: s(0)?,
            agent_id: s(1)?,
            source_agent_id: s(2)?,
            source_run_id: s(3)?,
            at: s(4)?,
            model: s(5)?,
            tools: s(6)?,
            created_at: r.int(7)?,
        },
        Table::AgUiThreads => Row::Thread {
            ns: s(0)?,
            thread_id: s(1)?,
            agent_id: s(2)?,
            created_at: r.int(3)?,
        },
        Table::WebhookOutbox => Row::Webhook {
            id: s(0)?,
            url: s(1)?,
            ns: s(2)?,
            kind: s(3)?,
            run_id: r.opt_text(4)?.map(str::to_string),
            body: s(5)?,
            created_at: r.int(6)?,
            state: s(7)?,
            attempts: r.int(8)?,
            next_at: r.int(9)?,
            last_status: r.opt_int(10)?,
            last_error: r.opt_text(11)?.map(str::to_string),
            last_at: r.opt_int(12)?,
        },
    }))
}

/// Inserts `rows` as they are (the caller's transaction makes the batch one commit).
pub async fn write<X: Exec>(x: &X, rows: &[Row]) -> Result<(), X::Error> {
    use Value::{Bool, Bytes, Float, Int, OptInt, OptText, Text};
    for row in rows {
        #[rustfmt::skip]
        let (sql, params) = match row {
            Row::Agent { ns, agent_id, cwd, updated_at, doc } => (
                sql!("INSERT INTO agents (ns, agent_id, cwd, updated_at, doc) VALUES (?1, ?2, ?3, ?4, ?5)"),
                vec![Text(ns), Text(agent_id), Text(cwd), Float(*updated_at), Text(doc.as_str())],
            ),
            Row::Run { ns, agent_id, run_id, turn_number, doc } => (
                sql!("INSERT INTO runs (ns, agent_id, run_id, turn_number, doc) VALUES (?1, ?2, ?3, ?4, ?5)"),
                vec![Text(ns), Text(agent_id), Text(run_id), Float(*turn_number), Text(doc.as_str())],
            ),
            Row::Event { ns, run_id, seq, event_type, payload, payload_ref, idempotency_key, created_at } => (
                sql!("INSERT INTO run_events (ns, run_id, seq, event_type, payload, payload_ref, idempotency_key, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"),
                vec![Text(ns), Text(run_id), Int(*seq), Text(event_type), Text(payload.as_str()), OptText(payload_ref.as_deref()), OptText(idempotency_key.as_deref()), Int(*created_at)],
            ),
            Row::Checkpoint { ns, agent_id, blob_id, data, crc32 } => (
                sql!("INSERT INTO checkpoints (ns, agent_id, blob_id, data, crc32) VALUES (?1, ?2, ?3, ?4, ?5)"),
                vec![Text(ns), Text(agent_id), Text(blob_id), Bytes(data), Int(*crc32)],
            ),
            Row::Note { ns, agent_id, key, value, updated_at } => (
                sql!("INSERT INTO memory_notes (ns, agent_id, key, value, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)"),
                vec![Text(ns), Text(agent_id), Text(key), Text(value), Int(*updated_at)],
            ),
            Row::ToolCall { id, ns, agent_id, run_id, tool_call_id, tool, started_at, ended_at, outcome, cut_off, waited_ms, arguments, result } => (
                sql!("INSERT INTO tool_calls (id, ns, agent_id, run_id, tool_call_id, tool, started_at, ended_at, outcome, cut_off, waited_ms, arguments, result) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"),
                vec![Int(*id), Text(ns), Text(agent_id), OptText(run_id.as_deref()), OptText(tool_call_id.as_deref()), Text(tool), Int(*started_at), OptInt(*ended_at), Text(outcome), Bool(*cut_off), OptInt(*waited_ms), OptText(arguments.as_deref()), OptText(result.as_deref())],
            ),
            Row::EventMeta { ns, run_id, seq, delta } => (
                sql!("INSERT INTO event_meta (ns, run_id, seq, delta) VALUES (?1, ?2, ?3, ?4)"),
                vec![Text(ns), Text(run_id), Int(*seq), Int(*delta)],
            ),
            Row::RunExpiry { ns, run_id, expired_through, pruned_at } => (
                sql!("INSERT INTO run_expiry (ns, run_id, expired_through, pruned_at) VALUES (?1, ?2, ?3, ?4)"),
                vec![Text(ns), Text(run_id), Int(*expired_through), Int(*pruned_at)],
            ),
            Row::Approval { id, ns, agent_id, run_id, tool, tool_call_id, args, created_at, expires_at, state, decided_by, decided_at, reason, owner, lease_until, approved_args, confirm } => (
                sql!("INSERT INTO approvals (id, ns, agent_id, run_id, tool, tool_call_id, args, created_at, expires_at, state, decided_by, decided_at, reason, owner, lease_until, approved_args, confirm) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)"),
                vec![Text(id), Text(ns), Text(agent_id), OptText(run_id.as_deref()), Text(tool), OptText(tool_call_id.as_deref()), Text(args.as_str()), Int(*created_at), Int(*expires_at), Text(state), OptText(decided_by.as_deref()), OptInt(*decided_at), OptText(reason.as_deref()), Text(owner), Int(*lease_until), OptText(approved_args.as_deref()), Bool(*confirm)],
            ),
            Row::RunInput { ns, run_id, text } => (
                sql!("INSERT INTO run_inputs (ns, run_id, text) VALUES (?1, ?2, ?3)"),
                vec![Text(ns), Text(run_id), Text(text)],
            ),
            Row::Fork { ns, agent_id, source_agent_id, source_run_id, at, model, tools, created_at } => (
                sql!("INSERT INTO session_forks (ns, agent_id, source_agent_id, source_run_id, at, model, tools, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"),
                vec![Text(ns), Text(agent_id), Text(source_agent_id), Text(source_run_id), Text(at), Text(model), Text(tools), Int(*created_at)],
            ),
            Row::Thread { ns, thread_id, agent_id, created_at } => (
                sql!("INSERT INTO ag_ui_threads (ns, thread_id, agent_id, created_at) VALUES (?1, ?2, ?3, ?4)"),
                vec![Text(ns), Text(thread_id), Text(agent_id), Int(*created_at)],
            ),
            Row::Webhook { id, url, ns, kind, run_id, body, created_at, state, attempts, next_at, last_status, last_error, last_at } => (
                sql!("INSERT INTO webhook_outbox (id, url, ns, type, run_id, body, created_at, state, attempts, next_at, last_status, last_error, last_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"),
                vec![Text(id), Text(url), Text(ns), Text(kind), OptText(run_id.as_deref()), Text(body), Int(*created_at), Text(state), Int(*attempts), Int(*next_at), OptInt(*last_status), OptText(last_error.as_deref()), OptInt(*last_at)],
            ),
        };
        x.execute(sql.get(X::DIALECT), &params).await?;
    }
    Ok(())
}

/// The rows of `table`.
pub async fn count<X: Exec>(x: &X, table: Table) -> Result<u64, X::Error> {
    let sql = format!("SELECT count(*) FROM {}", table.name());
    let n = x.first(&sql, &[], |r| r.int(0)).await?;
    Ok(n.map_or(0, |n| u64::try_from(n).unwrap_or(0)))
}
