//! The parts of [`RunRecords`](crate::store::RunRecords) that are SQLite's own (the rest
//! is [`sql::records`]): the `tool_calls`, `event_meta` and `run_expiry` tables of
//! migration 0002. Reads run on read connections; writes go through the writer (so they
//! share its commits and never race the bridge's appends).

use rusqlite::params;

use super::SqliteStore;
use crate::store::event_doc::now_ms;
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
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT r.ns, r.run_id, (SELECT max(seq) FROM run_events e \
                   WHERE e.ns = r.ns AND e.run_id = r.run_id) AS last \
                 FROM runs r WHERE {} AND last IS NOT NULL LIMIT ?2",
                sql::records::ended_before(sql::Dialect::Sqlite, 1)
            ))?;
            let runs = stmt
                .query_map(params![ended_before_ms, batch as i64], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, i64>(2)?,
                    ))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            let mut report = PruneReport::default();
            let now = now_ms();
            for (ns, run_id, last) in &runs {
                report.events += conn
                    .prepare_cached("DELETE FROM run_events WHERE ns = ?1 AND run_id = ?2")?
                    .execute(params![ns, run_id])? as u64;
                conn.prepare_cached("DELETE FROM event_meta WHERE ns = ?1 AND run_id = ?2")?
                    .execute(params![ns, run_id])?;
                conn.prepare_cached(
                    "INSERT INTO run_expiry (ns, run_id, expired_through, pruned_at) \
                     VALUES (?1, ?2, ?3, ?4) ON CONFLICT (ns, run_id) DO UPDATE SET \
                     expired_through = max(expired_through, excluded.expired_through), \
                     pruned_at = excluded.pruned_at",
                )?
                .execute(params![ns, run_id, last, now])?;
                report.runs += 1;
            }
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
        Box::pin(self.write_with(|conn| {
            let interrupted = conn
                .prepare_cached(
                    "UPDATE tool_calls SET outcome = 'interrupted', cut_off = 1, \
                     ended_at = coalesce(ended_at, ?1) WHERE outcome = 'running'",
                )?
                .execute(params![now_ms()])? as u64;
            conn.prepare_cached(
                "UPDATE tool_calls SET outcome = 'cancelled', cut_off = 0, \
                 ended_at = coalesce(ended_at, ?1) WHERE outcome = 'awaiting'",
            )?
            .execute(params![now_ms()])?;
            Ok(interrupted)
        }))
    }
}
