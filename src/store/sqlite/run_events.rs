//! SQL of the `runEvents` substore: the per-run append-only event log.

use rusqlite::{params, Connection, OptionalExtension, Row};

use super::{write_page, Conditions};
use crate::store::event_doc::{next_offset_json, now_ms, push_event, EventFields};
use crate::store::json::json_str;
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
    if let Some(e) = ev.over_quota(ns, seq) {
        return Err(e);
    }
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
        ev.payload.as_str(),
        ev.payload_ref,
        ev.idempotency_key,
        created_at
    ])?;
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
    let run_id_json = json_str(run_id);
    let out = write_page(
        rows,
        limit,
        "nextOffset",
        |row, out| push_event_row(out, &run_id_json, row),
        |row| row.get::<_, i64>(0),
        |seq| next_offset_json(*seq),
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
    for table in super::cascade::EVENT_TABLES {
        conn.prepare_cached(&format!("DELETE FROM {table} WHERE {}", c.sql()))?
            .execute(rusqlite::params_from_iter(c.params()))?;
    }
    Ok(None)
}

/// The event document of a row selected with [`COLUMNS`].
fn event_json(run_id: &str, row: &Row<'_>) -> rusqlite::Result<String> {
    let mut out = String::new();
    push_event_row(&mut out, &json_str(run_id), row)?;
    Ok(out)
}

/// Appends the event document of a row selected with [`COLUMNS`]; `run_id_json` is the run
/// id as a JSON string literal (the same for every row of a page).
fn push_event_row(out: &mut String, run_id_json: &str, row: &Row<'_>) -> rusqlite::Result<()> {
    push_event(
        out,
        run_id_json,
        EventFields {
            seq: row.get(0)?,
            event_type: row.get_ref(1)?.as_str()?,
            payload: row.get_ref(2)?.as_str()?,
            payload_ref: row.get_ref(3)?.as_str_or_null()?,
            idempotency_key: row.get_ref(4)?.as_str_or_null()?,
            created_at: row.get(5)?,
        },
    );
    Ok(())
}
