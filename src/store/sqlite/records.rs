//! The parts of [`RunRecords`](crate::store::RunRecords) that are SQLite's own (the rest
//! is [`sql::records`]): the `tool_calls`, `event_meta` and `run_expiry` tables of
//! migration 0002. Reads run on read connections; writes go through the writer (so they
//! share its commits and never race the bridge's appends).

use super::{Conn, SqliteStore};
use crate::store::records::PruneReport;
use crate::store::{sql, BoxFuture, StoreError};

/// Pages given back to the file system per prune batch (4 KiB each): bounded, so one batch
/// never holds the writer for long.
const VACUUM_PAGES_PER_BATCH: u32 = 4096;

sql::records::impl_run_records!(SqliteStore);
sql::forks::impl_fork_records!(SqliteStore);
sql::threads::impl_thread_records!(SqliteStore);
sql::outbox::impl_outbox_records!(SqliteStore);

impl SqliteStore {
    /// None: SQLite's `tool_calls` has no owner column.
    fn tool_call_owner(&self) -> Option<String> {
        None
    }

    fn prune_runs(
        &self,
        ended_before_ms: i64,
        batch: usize,
    ) -> BoxFuture<'_, Result<PruneReport, StoreError>> {
        Box::pin(self.write_with(move |conn| {
            let report = sql::ready(sql::prune::prune_runs(&Conn(conn), ended_before_ms, batch))?;
            if report.runs > 0 {
                // A no-op on a database created before auto_vacuum=INCREMENTAL (README). It
                // frees one page per step: step it to the end.
                let mut vacuum = conn.prepare(&format!(
                    "PRAGMA incremental_vacuum({VACUUM_PAGES_PER_BATCH})"
                ))?;
                let mut rows = vacuum.query([])?;
                while rows.next()?.is_some() {}
            }
            Ok(report)
        }))
    }

    fn interrupt_tool_calls(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(
            self.write_with(|conn| sql::ready(sql::prune::interrupt_tool_calls(&Conn(conn), ""))),
        )
    }
}
