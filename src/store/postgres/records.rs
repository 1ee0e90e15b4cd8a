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
