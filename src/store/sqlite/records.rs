//! The parts of [`RunRecords`](crate::store::RunRecords) that are SQLite's own (the rest
//! is [`sql::records`]): the `tool_calls`, `event_meta` and `run_expiry` tables of
//! migration 0002. Reads run on read connections; writes go through the writer (so they
//! share its commits and never race the bridge's appends).

use rusqlite::params;

use super::{Conn, SqliteStore};
use crate::store::records::{PruneReport, ToolCallStart};
use crate::store::{sql, BoxFuture, StoreError};

/// Pages given back to the file system per prune batch (4 KiB each): bounded, so one batch
/// never holds the writer for long.
const VACUUM_PAGES_PER_BATCH: u32 = 4096;

sql::records::impl_run_records!(SqliteStore);

impl SqliteStore {
    fn tool_call_start(
        &self,
        ns: String,
        call: ToolCallStart,
        held: bool,
    ) -> BoxFuture<'_, Result<i64, StoreError>> {
        Box::pin(self.write_with(move |conn| {
            conn.prepare_cached(
                "INSERT INTO tool_calls (ns, agent_id, run_id, tool_call_id, tool, started_at, \
                 outcome) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute(params![
                ns,
                call.agent_id,
                call.run_id,
                call.tool_call_id,
                call.tool,
                call.started_at_ms,
                if held { "awaiting" } else { "running" }
            ])?;
            Ok(conn.last_insert_rowid())
        }))
    }

    /// Read on a read connection first: only a first sighting goes through the writer.
    fn snapshot_delta_of(
        &self,
        [ns, run_id]: [String; 2],
        seq: u64,
        new: Option<u32>,
    ) -> BoxFuture<'_, Result<u32, StoreError>> {
        let seq = seq as i64;
        Box::pin(async move {
            let key = [ns, run_id];
            let k = key.clone();
            let read = self.sql_read(move |x| {
                let [ns, run_id] = k.clone();
                Box::pin(async move { sql::records::read_delta(x, &ns, &run_id, seq).await })
            });
            if let Some(delta) = read.await? {
                return Ok(delta);
            }
            let Some(new) = new else { return Ok(0) };
            self.sql_write(move |x| {
                let [ns, run_id] = key.clone();
                Box::pin(async move { sql::records::record_delta(x, &ns, &run_id, seq, new).await })
            })
            .await
        })
    }

    fn prune_runs(
        &self,
        ended_before_ms: i64,
        batch: usize,
    ) -> BoxFuture<'_, Result<PruneReport, StoreError>> {
        Box::pin(self.write_with(move |conn| {
            let report = sql::ready(sql::records::prune_runs(
                &Conn(conn),
                ended_before_ms,
                batch,
            ))?;
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
            self.write_with(|conn| sql::ready(sql::records::interrupt_tool_calls(&Conn(conn), ""))),
        )
    }
}
