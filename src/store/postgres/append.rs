//! `runEvents.append` on PostgreSQL in one round trip: one statement, sent outside an
//! explicit transaction (autocommit), instead of five (`BEGIN`, the counter's upsert, the
//! insert, `pg_notify`, `COMMIT`). An append is the bridge's most frequent call; on the same
//! machine each round trip cost about as much as SQLite's whole append (issue 26).
//!
//! The statement keeps every rule of the transactional append (`sql::run_events::append`),
//! because a single statement is atomic on its own:
//! - **idempotency key**: an event of the run with the same non-empty key is answered as it
//!   was stored, and nothing is written (`prior`). Two appends racing with the same new key
//!   are serialized by the counter row; the second one's insert then fails on the unique key
//!   index, the whole statement (its counter increment too) is undone, and the call runs
//!   again (`Fail::is_key_race`), finding the first event;
//! - **gap-free seqs**: the counter row of the run (`run_seqs`) is bumped by the same upsert
//!   as before, whose row lock makes concurrent appends to one run, from any daemon, wait for
//!   each other's commit; a failed statement gives its number back;
//! - **quota** (`max_events_per_run`): the upsert bumps the counter only while it is below
//!   the quota, so an append over it writes nothing and gets no row back, which is answered
//!   with the same `quota` error as before;
//! - **the notice for live followers**: `pg_notify` is called by the insert's `RETURNING`,
//!   once per written event, with the payload `listen::payload` builds, and is delivered at
//!   the statement's commit as before.

use tokio_postgres::types::Type;

use super::db::Db;
use super::error::Fail;
use super::listen;
use crate::store::event_doc::now_ms;
use crate::store::json::json_str;
use crate::store::sql::run_events::{appended, push_event_row};
use crate::store::{EventAppended, Namespace, NewEvent, StoreError, StoreOutput};

/// `$1` ns, `$2` run id, `$3` event type, `$4` payload, `$5` payload ref, `$6` idempotency
/// key, `$7` created at, `$8` the quota (the highest seq allowed), `$9` the channel, `$10`
/// the notification payload or its head, `$11` whether the seq and `}` complete it.
///
/// Answers the stored event's columns when the key was seen before, the new seq when an
/// event was written (with NULLs for the columns the caller already has), no row over quota.
const APPEND: &str = "\
WITH prior AS (\
  SELECT seq, event_type, payload, payload_ref, idempotency_key, created_at FROM run_events \
  WHERE ns = $1 AND run_id = $2 AND idempotency_key = $6 AND idempotency_key <> ''\
), bump AS (\
  INSERT INTO run_seqs AS c (ns, run_id, last_seq) \
  SELECT $1, $2, 1 WHERE $8 >= 1 AND NOT EXISTS (SELECT 1 FROM prior) \
  ON CONFLICT (ns, run_id) DO UPDATE SET last_seq = c.last_seq + 1 WHERE c.last_seq < $8 \
  RETURNING last_seq\
), ins AS (\
  INSERT INTO run_events (ns, run_id, seq, event_type, payload, payload_ref, idempotency_key, created_at) \
  SELECT $1, $2, last_seq, $3, $4, $5, $6, $7 FROM bump \
  RETURNING seq, pg_notify($9, $10 || CASE WHEN $11 THEN seq::text || '}' ELSE '' END) IS NULL\
) \
SELECT seq, event_type, payload, payload_ref, idempotency_key, created_at FROM prior \
UNION ALL SELECT seq, NULL, NULL, NULL, NULL, NULL FROM ins";

/// Appends one event in one statement on `db` (a pooled connection, autocommit); the answer
/// and the notice as [`crate::store::sql::run_events::append`] gives them.
pub async fn append(
    db: &Db<'_>,
    ns: &Namespace,
    ev: &NewEvent,
    instance: &str,
    schema: &str,
) -> Result<(StoreOutput, Option<EventAppended>), Fail> {
    let created_at = now_ms();
    let max_seq = ev
        .max_events
        .map_or(i64::MAX, |m| i64::try_from(m).unwrap_or(i64::MAX));
    let (note, with_seq) = listen::payload_template(instance, schema, ns, &ev.run_id);
    let n = ns.as_str();
    let payload = ev.payload.as_str();
    let rows = db
        .query(
            APPEND,
            &[
                (&n, Type::TEXT),
                (&ev.run_id, Type::TEXT),
                (&ev.event_type, Type::TEXT),
                (&payload, Type::TEXT),
                (&ev.payload_ref, Type::TEXT),
                (&ev.idempotency_key, Type::TEXT),
                (&created_at, Type::INT8),
                (&max_seq, Type::INT8),
                (&listen::CHANNEL, Type::TEXT),
                (&note, Type::TEXT),
                (&with_seq, Type::BOOL),
            ],
        )
        .await?;
    let Some(row) = rows.first() else {
        // Nothing seen before and nothing written: the counter is at the quota.
        let over = max_seq.saturating_add(1);
        return Err(Fail::Store(ev.over_quota(ns, over).unwrap_or_else(|| {
            StoreError::Internal(format!("append to run {} wrote nothing", ev.run_id))
        })));
    };
    let stored: Option<&str> = row.try_get(1)?;
    if stored.is_some() {
        let mut doc = String::new();
        push_event_row(&mut doc, &json_str(&ev.run_id), row)?;
        return Ok((Some(doc), None));
    }
    let seq: i64 = row.try_get(0)?;
    let (doc, notice) = appended(ns, ev, seq, created_at);
    Ok((Some(doc), Some(notice)))
}
