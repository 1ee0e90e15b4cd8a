//! SQL of the `runEvents` substore on PostgreSQL: the per-run append-only event log.

use tokio_postgres::types::Type;
use tokio_postgres::Row;

use super::db::Db;
use super::error::Fail;
use super::keyset::{limit_param, write_page};
use crate::store::event_doc::{next_offset_json, now_ms, push_event, EventFields};
use crate::store::json::json_str;
use crate::store::{EventAppended, Namespace, NewEvent, StoreOutput};

const COLUMNS: &str = "seq, event_type, payload, payload_ref, idempotency_key, created_at";

/// What an append did: the event document, and the notice for followers when it wrote one.
pub struct Appended {
    pub doc: String,
    pub notice: Option<EventAppended>,
}

/// Appends one event inside the caller's transaction.
///
/// The seq comes from the run's counter row, incremented by this statement: the row lock
/// it takes makes concurrent appends to the same run (from any number of daemons) wait for
/// each other's commit, other runs are not held up, and a rollback gives the number back,
/// so seqs are unique and gap-free. An idempotency key seen before returns the first event;
/// two appends racing with the same new key are serialized by the counter row, and the
/// second one's insert then fails on the unique key index: the transaction is rolled back
/// and the call runs again, finding the first event (see [`is_key_race`]).
pub async fn append(db: &Db<'_>, ns: &Namespace, ev: &NewEvent) -> Result<Appended, Fail> {
    let n = ns.as_str();
    if let Some(key) = ev.idempotency_key.as_deref().filter(|k| !k.is_empty()) {
        let existing = db
            .query_opt(
                &format!(
                    "SELECT {COLUMNS} FROM run_events WHERE ns = $1 AND run_id = $2 AND idempotency_key = $3"
                ),
                &[(&n, Type::TEXT), (&ev.run_id, Type::TEXT), (&key, Type::TEXT)],
            )
            .await?;
        if let Some(row) = existing {
            let mut doc = String::new();
            push_row(&mut doc, &json_str(&ev.run_id), &row);
            return Ok(Appended { doc, notice: None });
        }
    }
    let seq: i64 = db
        .query(
            "INSERT INTO run_seqs (ns, run_id, last_seq) VALUES ($1, $2, 1) \
             ON CONFLICT (ns, run_id) DO UPDATE SET last_seq = run_seqs.last_seq + 1 \
             RETURNING last_seq",
            &[(&n, Type::TEXT), (&ev.run_id, Type::TEXT)],
        )
        .await?
        .first()
        .map(|r| r.get(0))
        .unwrap_or(1);
    // The counter's increment is rolled back with the transaction.
    if let Some(e) = ev.over_quota(ns, seq) {
        return Err(Fail::Store(e));
    }
    let created_at = now_ms();
    db.execute(
        "INSERT INTO run_events (ns, run_id, seq, event_type, payload, payload_ref, idempotency_key, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        &[
            (&n, Type::TEXT),
            (&ev.run_id, Type::TEXT),
            (&seq, Type::INT8),
            (&ev.event_type, Type::TEXT),
            (&ev.payload.as_str(), Type::TEXT),
            (&ev.payload_ref, Type::TEXT),
            (&ev.idempotency_key, Type::TEXT),
            (&created_at, Type::INT8),
        ],
    )
    .await?;
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
    Ok(Appended {
        doc,
        notice: Some(EventAppended {
            ns: ns.clone(),
            run_id: ev.run_id.clone(),
            seq: seq as u64,
        }),
    })
}

/// Whether an append failed because another one committed the same idempotency key first
/// (run it again: it will return that event).
pub fn is_key_race(e: &Fail) -> bool {
    matches!(e, Fail::Db(db) if db.as_db_error().and_then(|d| d.constraint()) == Some("run_events_by_key"))
}

/// Events with `seq > after_seq`; `nextOffset` only while more remain.
pub async fn list(
    db: &Db<'_>,
    ns: &str,
    run_id: &str,
    after_seq: u64,
    limit: usize,
) -> Result<StoreOutput, Fail> {
    let after = i64::try_from(after_seq).unwrap_or(i64::MAX);
    let lim = limit_param(limit);
    let rows = db
        .query(
            &format!(
                "SELECT {COLUMNS} FROM run_events WHERE ns = $1 AND run_id = $2 AND seq > $3 \
                 ORDER BY seq LIMIT $4"
            ),
            &[
                (&ns, Type::TEXT),
                (&run_id, Type::TEXT),
                (&after, Type::INT8),
                (&lim, Type::INT8),
            ],
        )
        .await?;
    let run_id_json = json_str(run_id);
    Ok(Some(write_page(
        &rows,
        limit,
        "nextOffset",
        |row, out| push_row(out, &run_id_json, row),
        |row| next_offset_json(row.get(0)),
    )))
}

/// Appends the event document of a row selected with [`COLUMNS`].
fn push_row(out: &mut String, run_id_json: &str, row: &Row) {
    push_event(
        out,
        run_id_json,
        EventFields {
            seq: row.get(0),
            event_type: row.get(1),
            payload: row.get(2),
            payload_ref: row.get(3),
            idempotency_key: row.get(4),
            created_at: row.get(5),
        },
    );
}
