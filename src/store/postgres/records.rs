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
        self.sql_write(move |x| Box::pin(sql::records::prune_runs(x, ended_before_ms, batch)))
    }

    fn interrupt_tool_calls(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        // Only the calls of daemons that are gone: another daemon's call still runs.
        let only = format!(" AND {}", gone_owner());
        self.sql_write(move |x| {
            let only = only.clone();
            Box::pin(async move { sql::records::interrupt_tool_calls(x, &only).await })
        })
    }
}
