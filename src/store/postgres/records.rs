//! The parts of [`RunRecords`](crate::store::RunRecords) that are PostgreSQL's own (the
//! rest is [`sql::records`]): the `tool_calls`, `event_meta` and `run_expiry` tables of
//! migration 0002, with the SQLite backend's semantics. Several daemons share them: each
//! tool call row names the daemon that runs it (`owner`, its instance id), and a starting
//! daemon interrupts only the running calls of daemons no longer connected.

use tokio_postgres::types::Type;

use super::PgStore;
use crate::store::records::{PruneReport, ToolCallStart};
use crate::store::{sql, BoxFuture, StoreError};

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

sql::records::impl_run_records!(PgStore);

impl PgStore {
    fn tool_call_start(
        &self,
        ns: String,
        call: ToolCallStart,
        held: bool,
    ) -> BoxFuture<'_, Result<i64, StoreError>> {
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

    /// Read and recorded in one transaction.
    fn snapshot_delta_of(
        &self,
        key: [String; 2],
        seq: u64,
        new: Option<u32>,
    ) -> BoxFuture<'_, Result<u32, StoreError>> {
        let seq = i64::try_from(seq).unwrap_or(i64::MAX);
        self.sql_write(move |x| {
            let [ns, run_id] = key.clone();
            Box::pin(async move {
                if let Some(delta) = sql::records::read_delta(x, &ns, &run_id, seq).await? {
                    return Ok(delta);
                }
                let Some(new) = new else { return Ok(0) };
                sql::records::record_delta(x, &ns, &run_id, seq, new).await
            })
        })
    }

    fn prune_runs(
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
                     FROM runs r WHERE {} \
                       AND EXISTS (SELECT 1 FROM run_events e WHERE e.ns = r.ns AND e.run_id = r.run_id) \
                     LIMIT $2 FOR UPDATE OF r SKIP LOCKED",
                    sql::records::ended_before(sql::Dialect::Postgres, 1)
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

    fn interrupt_tool_calls(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
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
