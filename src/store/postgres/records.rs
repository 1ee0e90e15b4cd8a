//! [`RunRecords`] on PostgreSQL: the `tool_calls`, `event_meta` and `run_expiry` tables of
//! migration 0002, with the SQLite backend's semantics. Several daemons share them: each
//! tool call row names the daemon that runs it (`owner`, its instance id), and a starting
//! daemon interrupts only the running calls of daemons no longer connected.

use tokio_postgres::types::Type;

use super::PgStore;
use crate::store::records::{
    usage_sql, NamespaceUsage, PruneReport, RunPositions, RunRecords, ToolCallRecord,
    ToolCallStart, ToolOutcome,
};
use crate::store::{BoxFuture, Namespace, StoreError};

/// A daemon's listening connection is named this, a space and its instance id: how other
/// daemons tell that it is still alive.
pub const LISTENER_APP: &str = "callbackd listener";

/// SQL: the row's `owner` daemon is no longer connected (its listening connection is gone).
pub fn gone_owner() -> String {
    format!(
        "owner NOT IN (SELECT substr(application_name, {}) FROM pg_stat_activity \
         WHERE application_name LIKE '{LISTENER_APP} %')",
        LISTENER_APP.len() + 2
    )
}

/// The statuses after which a run changes no more.
const TERMINAL: &str = "('finished','error','cancelled','expired')";

/// SQL giving a number field of the run document `r.doc`, or NULL when it is not a number
/// (SQLite's comparison of a non-number with a number never matches either).
fn number_field(field: &str) -> String {
    format!(
        "CASE WHEN json_typeof(r.doc::json -> '{field}') = 'number' \
         THEN (r.doc::json ->> '{field}')::float8 END"
    )
}

impl RunRecords for PgStore {
    fn usage(
        &self,
        ns: Option<&Namespace>,
    ) -> BoxFuture<'_, Result<Vec<NamespaceUsage>, StoreError>> {
        let ns = ns.map(|n| n.as_str().to_string());
        self.run_read(move |db| {
            let ns = ns.clone();
            Box::pin(async move {
                let filter = if ns.is_some() { "WHERE ns = $1" } else { "" };
                let sql = usage_sql(&|c| format!("octet_length({c})"), filter, "::int8");
                let rows = match &ns {
                    Some(ns) => db.query(&sql, &[(ns, Type::TEXT)]).await?,
                    None => db.query(&sql, &[]).await?,
                };
                Ok(rows
                    .iter()
                    .map(|r| {
                        let n = |i| r.get::<_, Option<i64>>(i).unwrap_or(0).max(0) as u64;
                        NamespaceUsage {
                            namespace: r.get(0),
                            agents: n(1),
                            runs: n(2),
                            events: n(3),
                            checkpoints: n(4),
                            memory_notes: n(5),
                            stored_bytes: n(6),
                        }
                    })
                    .collect())
            })
        })
    }

    fn agent_count(&self, ns: &Namespace) -> BoxFuture<'_, Result<u64, StoreError>> {
        let ns = ns.as_str().to_string();
        self.run_read(move |db| {
            let ns = ns.clone();
            Box::pin(async move {
                let row = db
                    .query_opt(
                        "SELECT COUNT(*) FROM agents WHERE ns = $1",
                        &[(&ns, Type::TEXT)],
                    )
                    .await?;
                Ok(row.map_or(0, |r| r.get::<_, i64>(0).max(0) as u64))
            })
        })
    }

    fn tool_call_started(
        &self,
        ns: &Namespace,
        call: ToolCallStart,
        held: bool,
    ) -> BoxFuture<'_, Result<i64, StoreError>> {
        let ns = ns.as_str().to_string();
        let owner = self.inner.instance.clone();
        let outcome = if held { "awaiting" } else { "running" };
        self.run_tx(move |db| {
            let (ns, call, owner) = (ns.clone(), call.clone(), owner.clone());
            Box::pin(async move {
                let rows = db
                    .query(
                        "INSERT INTO tool_calls (ns, agent_id, run_id, tool_call_id, tool, \
                         started_at, outcome, owner) VALUES ($1, $2, $3, $4, $5, $6, $8, $7) \
                         RETURNING id",
                        &[
                            (&ns, Type::TEXT),
                            (&call.agent_id, Type::TEXT),
                            (&call.run_id, Type::TEXT),
                            (&call.tool_call_id, Type::TEXT),
                            (&call.tool, Type::TEXT),
                            (&call.started_at_ms, Type::INT8),
                            (&owner, Type::TEXT),
                            (&outcome, Type::TEXT),
                        ],
                    )
                    .await?;
                Ok(rows[0].get(0))
            })
        })
    }

    fn tool_call_resumed(&self, id: i64) -> BoxFuture<'_, Result<(), StoreError>> {
        self.run_tx(move |db| {
            Box::pin(async move {
                db.execute(
                    "UPDATE tool_calls SET outcome = 'running', started_at = $2 WHERE id = $1",
                    &[
                        (&id, Type::INT8),
                        (&crate::store::event_doc::now_ms(), Type::INT8),
                    ],
                )
                .await?;
                Ok(())
            })
        })
    }

    fn tool_call_ended(
        &self,
        id: i64,
        outcome: ToolOutcome,
        cut_off: bool,
        ended_at_ms: i64,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        self.run_tx(move |db| {
            Box::pin(async move {
                db.execute(
                    "UPDATE tool_calls SET ended_at = $2, outcome = $3, cut_off = $4 WHERE id = $1",
                    &[
                        (&id, Type::INT8),
                        (&ended_at_ms, Type::INT8),
                        (&outcome.as_str(), Type::TEXT),
                        (&cut_off, Type::BOOL),
                    ],
                )
                .await?;
                Ok(())
            })
        })
    }

    fn tool_calls_of_run(
        &self,
        ns: &Namespace,
        run_id: &str,
    ) -> BoxFuture<'_, Result<Vec<ToolCallRecord>, StoreError>> {
        let (ns, run_id) = (ns.as_str().to_string(), run_id.to_string());
        self.run_read(move |db| {
            let (ns, run_id) = (ns.clone(), run_id.clone());
            Box::pin(async move {
                let rows = db
                    .query(
                        "SELECT agent_id, run_id, tool_call_id, tool, started_at, ended_at, \
                         outcome, cut_off FROM tool_calls WHERE ns = $1 AND run_id = $2 ORDER BY id",
                        &[(&ns, Type::TEXT), (&run_id, Type::TEXT)],
                    )
                    .await?;
                Ok(rows
                    .iter()
                    .map(|r| ToolCallRecord {
                        agent_id: r.get(0),
                        run_id: r.get(1),
                        tool_call_id: r.get(2),
                        tool: r.get(3),
                        started_at_ms: r.get(4),
                        ended_at_ms: r.get(5),
                        outcome: ToolOutcome::parse(r.get(6)),
                        cut_off: r.get(7),
                    })
                    .collect())
            })
        })
    }

    fn snapshot_delta(
        &self,
        ns: &Namespace,
        run_id: &str,
        seq: u64,
        new: Option<u32>,
    ) -> BoxFuture<'_, Result<u32, StoreError>> {
        let (ns, run_id) = (ns.as_str().to_string(), run_id.to_string());
        let seq = i64::try_from(seq).unwrap_or(i64::MAX);
        self.run_tx(move |db| {
            let (ns, run_id) = (ns.clone(), run_id.clone());
            Box::pin(async move {
                const READ: &str =
                    "SELECT delta FROM event_meta WHERE ns = $1 AND run_id = $2 AND seq = $3";
                let key = [
                    (&ns as _, Type::TEXT),
                    (&run_id as _, Type::TEXT),
                    (&seq as _, Type::INT8),
                ];
                if let Some(row) = db.query_opt(READ, &key).await? {
                    return Ok(u32::try_from(row.get::<_, i64>(0)).unwrap_or(0));
                }
                let Some(new) = new else { return Ok(0) };
                // The first value recorded wins, whichever daemon records it.
                db.execute(
                    "INSERT INTO event_meta (ns, run_id, seq, delta) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT DO NOTHING",
                    &[
                        (&ns, Type::TEXT),
                        (&run_id, Type::TEXT),
                        (&seq, Type::INT8),
                        (&i64::from(new), Type::INT8),
                    ],
                )
                .await?;
                let row = db.query_opt(READ, &key).await?;
                Ok(row.map_or(new, |r| u32::try_from(r.get::<_, i64>(0)).unwrap_or(0)))
            })
        })
    }

    fn set_run_input(
        &self,
        ns: &Namespace,
        run_id: &str,
        text: &str,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        let (ns, run_id, text) = (
            ns.as_str().to_string(),
            run_id.to_string(),
            text.to_string(),
        );
        self.run_tx(move |db| {
            let (ns, run_id, text) = (ns.clone(), run_id.clone(), text.clone());
            Box::pin(async move {
                db.execute(
                    "INSERT INTO run_inputs (ns, run_id, text) VALUES ($1, $2, $3) \
                     ON CONFLICT DO NOTHING",
                    &[
                        (&ns, Type::TEXT),
                        (&run_id, Type::TEXT),
                        (&text, Type::TEXT),
                    ],
                )
                .await?;
                Ok(())
            })
        })
    }

    fn run_inputs(
        &self,
        ns: &Namespace,
        run_ids: &[String],
    ) -> BoxFuture<'_, Result<std::collections::HashMap<String, String>, StoreError>> {
        let (ns, ids) = (ns.as_str().to_string(), run_ids.to_vec());
        self.run_tx(move |db| {
            let (ns, ids) = (ns.clone(), ids.clone());
            Box::pin(async move {
                let rows = db
                    .query(
                        "SELECT run_id, text FROM run_inputs WHERE ns = $1 AND run_id = ANY($2)",
                        &[(&ns, Type::TEXT), (&ids, Type::TEXT_ARRAY)],
                    )
                    .await?;
                Ok(rows
                    .iter()
                    .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
                    .collect())
            })
        })
    }

    fn run_positions(
        &self,
        ns: &Namespace,
        run_id: &str,
    ) -> BoxFuture<'_, Result<RunPositions, StoreError>> {
        let (ns, run_id) = (ns.as_str().to_string(), run_id.to_string());
        self.run_read(move |db| {
            let (ns, run_id) = (ns.clone(), run_id.clone());
            Box::pin(async move {
                let row = db
                    .query_opt(
                        "SELECT (SELECT max(seq) FROM run_events WHERE ns = $1 AND run_id = $2), \
                         (SELECT expired_through FROM run_expiry WHERE ns = $1 AND run_id = $2)",
                        &[(&ns, Type::TEXT), (&run_id, Type::TEXT)],
                    )
                    .await?;
                let (max, expired): (Option<i64>, Option<i64>) =
                    row.map_or((None, None), |r| (r.get(0), r.get(1)));
                Ok(RunPositions::from_stored(max, expired))
            })
        })
    }

    fn prune_batch(
        &self,
        ended_before_ms: i64,
        batch: usize,
    ) -> BoxFuture<'_, Result<PruneReport, StoreError>> {
        let batch = i64::try_from(batch).unwrap_or(i64::MAX);
        let ended_before = ended_before_ms as f64;
        self.run_tx(move |db| {
            Box::pin(async move {
                // SKIP LOCKED: daemons pruning at once take different runs.
                let sql = format!(
                    "SELECT r.ns, r.run_id, \
                       (SELECT max(seq) FROM run_events e WHERE e.ns = r.ns AND e.run_id = r.run_id) \
                     FROM runs r \
                     WHERE r.doc::json ->> 'status' IN {TERMINAL} \
                       AND coalesce({}, {}) < $1 \
                       AND EXISTS (SELECT 1 FROM run_events e WHERE e.ns = r.ns AND e.run_id = r.run_id) \
                     LIMIT $2 FOR UPDATE OF r SKIP LOCKED",
                    number_field("endedAt"),
                    number_field("updatedAt")
                );
                let runs = db
                    .query(&sql, &[(&ended_before, Type::FLOAT8), (&batch, Type::INT8)])
                    .await?;
                let mut report = PruneReport::default();
                let now = crate::store::event_doc::now_ms();
                for row in &runs {
                    let (ns, run_id): (&str, &str) = (row.get(0), row.get(1));
                    let Some(last) = row.get::<_, Option<i64>>(2) else { continue };
                    let key = [(&ns as _, Type::TEXT), (&run_id as _, Type::TEXT)];
                    report.events += db
                        .execute("DELETE FROM run_events WHERE ns = $1 AND run_id = $2", &key)
                        .await?;
                    for table in ["event_meta", "run_seqs"] {
                        db.execute(
                            &format!("DELETE FROM {table} WHERE ns = $1 AND run_id = $2"),
                            &key,
                        )
                        .await?;
                    }
                    db.execute(
                        "INSERT INTO run_expiry (ns, run_id, expired_through, pruned_at) \
                         VALUES ($1, $2, $3, $4) ON CONFLICT (ns, run_id) DO UPDATE SET \
                         expired_through = greatest(run_expiry.expired_through, excluded.expired_through), \
                         pruned_at = excluded.pruned_at",
                        &[
                            (&ns, Type::TEXT),
                            (&run_id, Type::TEXT),
                            (&last, Type::INT8),
                            (&now, Type::INT8),
                        ],
                    )
                    .await?;
                    report.runs += 1;
                }
                Ok(report)
            })
        })
    }

    fn interrupt_running_tool_calls(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        self.run_tx(move |db| {
            Box::pin(async move {
                let now = crate::store::event_doc::now_ms();
                // Only the calls of daemons that are gone: another daemon's call still runs.
                let n = db
                    .execute(
                        &format!(
                            "UPDATE tool_calls SET outcome = 'interrupted', cut_off = true, \
                             ended_at = coalesce(ended_at, $1) WHERE outcome = 'running' AND {}",
                            gone_owner()
                        ),
                        &[(&now, Type::INT8)],
                    )
                    .await?;
                db.execute(
                    &format!(
                        "UPDATE tool_calls SET outcome = 'cancelled', cut_off = false, \
                         ended_at = coalesce(ended_at, $1) WHERE outcome = 'awaiting' AND {}",
                        gone_owner()
                    ),
                    &[(&now, Type::INT8)],
                )
                .await?;
                Ok(n)
            })
        })
    }
}
