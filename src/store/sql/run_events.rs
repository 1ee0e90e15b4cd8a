//! SQL of the `runEvents` substore: the per-run append-only event log.

use super::page::limit_clause;
use super::{sql, write_page, Exec, Row, Sql, Value};
use crate::store::event_doc::{next_offset_json, now_ms, push_event, EventFields};
use crate::store::json::json_str;
use crate::store::{EventAppended, Namespace, NewEvent, StoreError, StoreOutput};

const COLUMNS: &str = "seq, event_type, payload, payload_ref, idempotency_key, created_at";

/// The seq of the next event of run `?2`.
///
/// SQLite: max seq + 1. The append runs inside the writer's transaction and the writer is
/// the only thread that writes, so it is unique and gap-free per run even under concurrent
/// callers.
///
/// PostgreSQL: the run's counter row, incremented by this statement. The row lock it takes
/// makes concurrent appends to the same run (from any number of daemons) wait for each
/// other's commit, other runs are not held up, and a rollback gives the number back, so
/// seqs are unique and gap-free. Two appends racing with the same new idempotency key are
/// serialized by the counter row, and the second one's insert then fails on the unique key
/// index: the transaction is rolled back and the call runs again, finding the first event.
/// The PostgreSQL store's own appends run the one-statement form of this whole function
/// (`store/postgres/append.rs`, one round trip instead of five), which bumps the same
/// counter row the same way; keep the two in step.
const NEXT_SEQ: Sql = Sql {
    sqlite: "SELECT COALESCE(MAX(seq), 0) + 1 FROM run_events WHERE ns = ?1 AND run_id = ?2",
    postgres: "INSERT INTO run_seqs (ns, run_id, last_seq) VALUES ($1, $2, 1) \
               ON CONFLICT (ns, run_id) DO UPDATE SET last_seq = run_seqs.last_seq + 1 \
               RETURNING last_seq",
};

/// Appends one event and returns its document, plus the notice for live followers when a
/// new row was written. An idempotency key seen before returns the first event unchanged,
/// whatever its type or payload now.
pub async fn append<X: Exec>(
    x: &X,
    ns: &Namespace,
    ev: &NewEvent,
) -> Result<(StoreOutput, Option<EventAppended>), X::Error> {
    let n = ns.as_str();
    if let Some(key) = ev.idempotency_key.as_deref().filter(|k| !k.is_empty()) {
        let sql = sql!("SELECT seq, event_type, payload, payload_ref, idempotency_key, created_at FROM run_events WHERE ns = ?1 AND run_id = ?2 AND idempotency_key = ?3");
        let params = [Value::Text(n), Value::Text(&ev.run_id), Value::Text(key)];
        let existing = x
            .first(sql.get(X::DIALECT), &params, |row| {
                let mut doc = String::new();
                push_event_row(&mut doc, &json_str(&ev.run_id), row)?;
                Ok(doc)
            })
            .await?;
        if let Some(doc) = existing {
            return Ok((Some(doc), None));
        }
    }
    let params = [Value::Text(n), Value::Text(&ev.run_id)];
    let seq = x
        .first(NEXT_SEQ.get(X::DIALECT), &params, |r| r.int(0))
        .await?
        .unwrap_or(1);
    // On PostgreSQL the counter's increment is rolled back with the transaction.
    if let Some(e) = ev.over_quota(ns, seq) {
        return Err(e.into());
    }
    let created_at = now_ms();
    let sql = sql!(
        "INSERT INTO run_events (ns, run_id, seq, event_type, payload, payload_ref, idempotency_key, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
    );
    let params = [
        Value::Text(n),
        Value::Text(&ev.run_id),
        Value::Int(seq),
        Value::Text(&ev.event_type),
        Value::Text(ev.payload.as_str()),
        Value::OptText(ev.payload_ref.as_deref()),
        Value::OptText(ev.idempotency_key.as_deref()),
        Value::Int(created_at),
    ];
    x.execute(sql.get(X::DIALECT), &params).await?;
    let (doc, notice) = appended(ns, ev, seq, created_at);
    Ok((Some(doc), Some(notice)))
}

/// The document of a newly written event and the notice for its live followers (also the
/// answer of PostgreSQL's one-statement append, `store/postgres/append.rs`).
pub fn appended(
    ns: &Namespace,
    ev: &NewEvent,
    seq: i64,
    created_at: i64,
) -> (String, EventAppended) {
    let mut doc = String::with_capacity(ev.payload.len() + ev.run_id.len() + 160);
    push_event(
        &mut doc,
        &json_str(&ev.run_id),
        EventFields {
            seq,
            event_type: &ev.event_type,
            payload: ev.payload.as_str(),
            payload_ref: ev.payload_ref.as_deref(),
            idempotency_key: ev.idempotency_key.as_deref(),
            created_at,
        },
    );
    let notice = EventAppended {
        ns: ns.clone(),
        run_id: ev.run_id.clone(),
        seq: seq as u64,
    };
    (doc, notice)
}

/// Events with `seq > after_seq`; `nextOffset` only while more remain.
pub async fn list<X: Exec>(
    x: &X,
    ns: &str,
    run_id: &str,
    after_seq: u64,
    limit: usize,
) -> Result<StoreOutput, X::Error> {
    let d = X::DIALECT;
    let after = i64::try_from(after_seq).unwrap_or(i64::MAX);
    let mut params = vec![Value::Text(ns), Value::Text(run_id), Value::Int(after)];
    let limit_sql = limit_clause(d, limit, &mut params);
    let sql = format!(
        "SELECT {COLUMNS} FROM run_events WHERE ns = {} AND run_id = {} AND seq > {} \
         ORDER BY seq {limit_sql}",
        d.param(1),
        d.param(2),
        d.param(3)
    );
    let run_id_json = json_str(run_id);
    let out = write_page(
        x,
        &sql,
        &params,
        limit,
        "nextOffset",
        |row, out| push_event_row(out, &run_id_json, row),
        |row| row.int(0),
        |seq| next_offset_json(*seq),
    )
    .await?;
    Ok(Some(out))
}

/// The last stored event of each run of `run_ids`, as the event documents [`list`] gives,
/// by run id: a page of runs reads them in one statement. Runs with none are missing.
pub async fn last_of_runs<X: Exec>(
    x: &X,
    ns: &str,
    run_ids: &[String],
) -> Result<std::collections::HashMap<String, String>, X::Error> {
    let d = X::DIALECT;
    // Each listed run on its own: its max(seq), then that row, by the primary key. `CROSS
    // JOIN` keeps the list the outer loop on SQLite, whose planner otherwise scans the
    // namespace's events for the (unknown-sized) list.
    let sql = format!(
        "SELECT e.seq, e.event_type, e.payload, e.payload_ref, e.idempotency_key, \
         e.created_at, e.run_id FROM {list} CROSS JOIN run_events e WHERE e.ns = {p} AND \
         e.run_id = j.value AND e.seq = \
         (SELECT max(seq) FROM run_events WHERE ns = {p} AND run_id = j.value)",
        p = d.param(1),
        list = d.list_rows(2)
    );
    let params = [Value::Text(ns), Value::TextList(run_ids)];
    let rows = x
        .all(&sql, &params, |row| {
            let run_id = row.text(6)?.to_string();
            let mut doc = String::new();
            push_event_row(&mut doc, &json_str(&run_id), row)?;
            Ok((run_id, doc))
        })
        .await?;
    Ok(rows.into_iter().collect())
}

/// Appends the event document of a row selected with [`COLUMNS`]; `run_id_json` is the run
/// id as a JSON string literal (the same for every row of a page).
pub fn push_event_row(
    out: &mut String,
    run_id_json: &str,
    row: &dyn Row,
) -> Result<(), StoreError> {
    push_event(
        out,
        run_id_json,
        EventFields {
            seq: row.int(0)?,
            event_type: row.text(1)?,
            payload: row.text(2)?,
            payload_ref: row.opt_text(3)?,
            idempotency_key: row.opt_text(4)?,
            created_at: row.int(5)?,
        },
    );
    Ok(())
}
