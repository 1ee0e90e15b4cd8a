//! The parts of [`RunRecords`](crate::store::RunRecords) that are PostgreSQL's own (the
//! rest is [`sql::records`]): the `tool_calls`, `event_meta` and `run_expiry` tables of
//! migration 0002, with the SQLite backend's semantics. Several daemons share them: each
//! tool call row names the daemon that runs it (`owner`, its instance id), and a starting
//! daemon interrupts only the running calls of daemons no longer connected.

use super::PgStore;
use crate::store::records::PruneReport;
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
sql::forks::impl_fork_records!(PgStore);
sql::threads::impl_thread_records!(PgStore);
sql::outbox::impl_outbox_records!(PgStore);

impl PgStore {
    /// This daemon (its instance id), so that another one starting interrupts the call
    /// only once this one is gone.
    fn tool_call_owner(&self) -> Option<String> {
        Some(self.inner.instance.clone())
    }

    /// The answer when no write is needed, read on a pooled connection outside a
    /// transaction: the recorded delta, or 0 when none is recorded and `new` is none. Most
    /// snapshots of a followed run have nothing to record (no tokens were relayed for them):
    /// their frame costs one statement, not a transaction of three.
    fn delta_seen(
        &self,
        [ns, run_id]: [String; 2],
        seq: i64,
        new: Option<u32>,
    ) -> BoxFuture<'_, Result<Option<u32>, StoreError>> {
        self.sql_read(move |x| {
            let (ns, run_id) = (ns.clone(), run_id.clone());
            Box::pin(async move {
                let seen = sql::records::read_delta(x, &ns, &run_id, seq).await?;
                Ok(seen.or(new.is_none().then_some(0)))
            })
        })
    }

    fn prune_runs(
        &self,
        ended_before_ms: i64,
        batch: usize,
    ) -> BoxFuture<'_, Result<PruneReport, StoreError>> {
        self.sql_write(move |x| Box::pin(sql::prune::prune_runs(x, ended_before_ms, batch)))
    }

    fn interrupt_tool_calls(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        // Only the calls of daemons that are gone: another daemon's call still runs.
        let only = format!(" AND {}", gone_owner());
        self.sql_write(move |x| {
            let only = only.clone();
            Box::pin(async move { sql::prune::interrupt_tool_calls(x, &only).await })
        })
    }
}
