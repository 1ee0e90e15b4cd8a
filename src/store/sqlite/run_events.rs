//! SQL of the `runEvents` substore: the per-run append-only event log.

use rusqlite::{params, Connection, OptionalExtension, Row};

use super::{json_str, write_page, Conditions};
use crate::store::{EventAppended, Namespace, NewEvent, StoreError, StoreOutput};

const COLUMNS: &str = "seq, event_type, payload, payload_ref, idempotency_key, created_at";

/// Appends one event and returns its document, plus the notice for live followers when a
/// new row was written.
///
/// Invariant: runs inside the writer's transaction, and the writer is the only thread that
/// writes, so "max seq + 1" is unique and gap-free per run even under concurrent callers.
pub fn append(
    conn: &Connection,
    ns: &Namespace,
    ev: NewEvent,
) -> Result<(StoreOutput, Option<EventAppended>), StoreError> {
    if let Some(key) = ev.idempotency_key.as_deref().filter(|k| !k.is_empty()) {
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM run_events WHERE ns = ?1 AND run_id = ?2 AND idempotency_key = ?3"
        ))?;
        // A repeat returns the first event unchanged, whatever its type or payload now.
        let existing = stmt
            .query_row(params![ns.as_str(), ev.run_id, key], |row| {
                event_json(&ev.run_id, row)
            })
            .optional()?;
        if let Some(doc) = existing {
            return Ok((Some(doc), None));
        }
    }
    let seq: i64 = conn
        .prepare_cached(
            "SELECT COALESCE(MAX(seq), 0) + 1 FROM run_events WHERE ns = ?1 AND run_id = ?2",
        )?
        .query_row(params![ns.as_str(), ev.run_id], |r| r.get(0))?;
    let created_at = now_ms();
    conn.prepare_cached(
        "INSERT INTO run_events (ns, run_id, seq, event_type, payload, payload_ref, idempotency_key, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        ns.as_str(),
        ev.run_id,
        seq,
        ev.event_type,
        ev.payload,
        ev.payload_ref,
        ev.idempotency_key,
        created_at
    ])?;
    let doc = format_event(
        &ev.run_id,
        seq,
        &ev.event_type,
        &ev.payload,
        ev.payload_ref.as_deref(),
        ev.idempotency_key.as_deref(),
        created_at,
    );
    let notice = EventAppended {
        ns: ns.clone(),
        run_id: ev.run_id,
        seq: seq as u64,
    };
    Ok((Some(doc), Some(notice)))
}

/// Events with `seq > after_seq`; `nextOffset` only while more remain.
pub fn list(
    conn: &Connection,
    ns: &str,
    run_id: &str,
    after_seq: u64,
    limit: usize,
) -> Result<StoreOutput, StoreError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM run_events WHERE ns = ?1 AND run_id = ?2 AND seq > ?3 \
         ORDER BY seq LIMIT {}",
        limit.saturating_add(1)
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let after = i64::try_from(after_seq).unwrap_or(i64::MAX);
    let rows = stmt.query(params![ns, run_id, after])?;
    let out = write_page(
        rows,
        limit,
        "nextOffset",
        |row, out| {
            out.push_str(&event_json(run_id, row)?);
            Ok(())
        },
        |row| row.get::<_, i64>(0),
        |seq| json_str(&seq.to_string()),
    )?;
    Ok(Some(out))
}

/// `None` deletes every run's events (contract §2.6 recommendation). Idempotent.
pub fn delete(
    conn: &Connection,
    ns: &str,
    run_ids: Option<&[String]>,
) -> Result<StoreOutput, StoreError> {
    let mut c = Conditions::new(ns);
    c.in_list("run_id", run_ids);
    conn.prepare_cached(&format!("DELETE FROM run_events WHERE {}", c.sql()))?
        .execute(rusqlite::params_from_iter(c.params()))?;
    Ok(None)
}

/// The event document of a row selected with [`COLUMNS`].
fn event_json(run_id: &str, row: &Row<'_>) -> rusqlite::Result<String> {
    Ok(format_event(
        run_id,
        row.get(0)?,
        row.get_ref(1)?.as_str()?,
        row.get_ref(2)?.as_str()?,
        row.get_ref(3)?.as_str_or_null()?,
        row.get_ref(4)?.as_str_or_null()?,
        row.get(5)?,
    ))
}

fn format_event(
    run_id: &str,
    seq: i64,
    event_type: &str,
    payload: &str,
    payload_ref: Option<&str>,
    idempotency_key: Option<&str>,
    created_at: i64,
) -> String {
    let opt = |v: Option<&str>| v.map_or_else(|| "null".to_string(), json_str);
    format!(
        r#"{{"runId":{},"seq":{seq},"offset":"{seq}","eventType":{},"payload":{payload},"payloadRef":{},"idempotencyKey":{},"createdAt":{created_at}}}"#,
        json_str(run_id),
        json_str(event_type),
        opt(payload_ref),
        opt(idempotency_key),
    )
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
