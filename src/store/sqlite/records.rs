//! [`RunRecords`] on SQLite: the `tool_calls`, `event_meta` and `run_expiry` tables of
//! migration 0002. Reads run on the caller's thread like store reads; writes go through the
//! writer (so they share its commits and never race the bridge's appends).

use rusqlite::{params, OptionalExtension};

use super::SqliteStore;
use crate::store::event_doc::now_ms;
use crate::store::records::{
    usage_sql, NamespaceUsage, PruneReport, RunPositions, RunRecords, ToolCallRecord,
    ToolCallStart, ToolOutcome,
};
use crate::store::{BoxFuture, Namespace, StoreError};

/// Pages given back to the file system per prune batch (4 KiB each): bounded, so one batch
/// never holds the writer for long.
const VACUUM_PAGES_PER_BATCH: u32 = 4096;

/// The statuses after which a run changes no more.
const TERMINAL: &str = "('finished','error','cancelled','expired')";

impl RunRecords for SqliteStore {
    fn usage(
        &self,
        ns: Option<&Namespace>,
    ) -> BoxFuture<'_, Result<Vec<NamespaceUsage>, StoreError>> {
        let ns = ns.map(|n| n.as_str().to_string());
        Box::pin(self.read_with(move |conn| {
            let filter = if ns.is_some() { "WHERE ns = ?1" } else { "" };
            let sql = usage_sql(&|c| format!("length(CAST({c} AS BLOB))"), filter, "");
            let mut stmt = conn.prepare(&sql)?;
            let row = |r: &rusqlite::Row<'_>| {
                let n = |i| {
                    r.get::<_, Option<i64>>(i)
                        .map(|v| v.unwrap_or(0).max(0) as u64)
                };
                Ok(NamespaceUsage {
                    namespace: r.get(0)?,
                    agents: n(1)?,
                    runs: n(2)?,
                    events: n(3)?,
                    checkpoints: n(4)?,
                    memory_notes: n(5)?,
                    stored_bytes: n(6)?,
                })
            };
            let rows = match &ns {
                Some(ns) => stmt
                    .query_map(params![ns], row)?
                    .collect::<Result<Vec<_>, _>>(),
                None => stmt.query_map([], row)?.collect::<Result<Vec<_>, _>>(),
            };
            Ok(rows?)
        }))
    }

    fn agent_count(&self, ns: &Namespace) -> BoxFuture<'_, Result<u64, StoreError>> {
        let ns = ns.as_str().to_string();
        Box::pin(async move {
            self.readers.with(|conn| {
                let n: i64 = conn
                    .prepare_cached("SELECT COUNT(*) FROM agents WHERE ns = ?1")?
                    .query_row(params![ns], |r| r.get(0))?;
                Ok(n.max(0) as u64)
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

    fn tool_call_resumed(&self, id: i64) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.write_with(move |conn| {
            conn.prepare_cached(
                "UPDATE tool_calls SET outcome = 'running', started_at = ?2 WHERE id = ?1",
            )?
            .execute(params![id, now_ms()])?;
            Ok(())
        }))
    }

    fn tool_call_ended(
        &self,
        id: i64,
        outcome: ToolOutcome,
        cut_off: bool,
        ended_at_ms: i64,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.write_with(move |conn| {
            conn.prepare_cached(
                "UPDATE tool_calls SET ended_at = ?2, outcome = ?3, cut_off = ?4 WHERE id = ?1",
            )?
            .execute(params![id, ended_at_ms, outcome.as_str(), cut_off])?;
            Ok(())
        }))
    }

    fn tool_calls_of_run(
        &self,
        ns: &Namespace,
        run_id: &str,
    ) -> BoxFuture<'_, Result<Vec<ToolCallRecord>, StoreError>> {
        let (ns, run_id) = (ns.as_str().to_string(), run_id.to_string());
        Box::pin(async move {
            self.readers.with(|conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT agent_id, run_id, tool_call_id, tool, started_at, ended_at, outcome, \
                     cut_off FROM tool_calls WHERE ns = ?1 AND run_id = ?2 ORDER BY id",
                )?;
                let rows = stmt.query_map(params![ns, run_id], |r| {
                    Ok(ToolCallRecord {
                        agent_id: r.get(0)?,
                        run_id: r.get(1)?,
                        tool_call_id: r.get(2)?,
                        tool: r.get(3)?,
                        started_at_ms: r.get(4)?,
                        ended_at_ms: r.get(5)?,
                        outcome: ToolOutcome::parse(&r.get::<_, String>(6)?),
                        cut_off: r.get(7)?,
                    })
                })?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
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
        Box::pin(async move {
            let read = |conn: &rusqlite::Connection| -> Result<Option<u32>, StoreError> {
                Ok(conn
                    .prepare_cached(
                        "SELECT delta FROM event_meta WHERE ns = ?1 AND run_id = ?2 AND seq = ?3",
                    )?
                    .query_row(params![ns, run_id, seq as i64], |r| r.get(0))
                    .optional()?)
            };
            if let Some(delta) = self.readers.with(read)? {
                return Ok(delta);
            }
            let Some(new) = new else { return Ok(0) };
            let (ns, run_id) = (ns.clone(), run_id.clone());
            self.write_with(move |conn| {
                conn.prepare_cached(
                    "INSERT INTO event_meta (ns, run_id, seq, delta) VALUES (?1, ?2, ?3, ?4) \
                     ON CONFLICT DO NOTHING",
                )?
                .execute(params![ns, run_id, seq as i64, new])?;
                Ok(conn
                    .prepare_cached(
                        "SELECT delta FROM event_meta WHERE ns = ?1 AND run_id = ?2 AND seq = ?3",
                    )?
                    .query_row(params![ns, run_id, seq as i64], |r| r.get(0))?)
            })
            .await
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
        Box::pin(async move {
            self.write_with(move |conn| {
                conn.prepare_cached(
                    "INSERT INTO run_inputs (ns, run_id, text) VALUES (?1, ?2, ?3) \
                     ON CONFLICT DO NOTHING",
                )?
                .execute(params![ns, run_id, text])?;
                Ok(())
            })
            .await
        })
    }

    fn run_inputs(
        &self,
        ns: &Namespace,
        run_ids: &[String],
    ) -> BoxFuture<'_, Result<std::collections::HashMap<String, String>, StoreError>> {
        let ns = ns.as_str().to_string();
        let ids = serde_json::to_string(run_ids).unwrap_or_else(|_| "[]".into());
        Box::pin(async move {
            self.readers.with(|conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT run_id, text FROM run_inputs WHERE ns = ?1 \
                     AND run_id IN (SELECT value FROM json_each(?2))",
                )?;
                let rows = stmt.query_map(params![ns, ids], |r| Ok((r.get(0)?, r.get(1)?)))?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
        })
    }

    fn run_positions(
        &self,
        ns: &Namespace,
        run_id: &str,
    ) -> BoxFuture<'_, Result<RunPositions, StoreError>> {
        let (ns, run_id) = (ns.as_str().to_string(), run_id.to_string());
        Box::pin(async move {
            self.readers.with(|conn| {
                let max: Option<i64> = conn
                    .prepare_cached(
                        "SELECT max(seq) FROM run_events WHERE ns = ?1 AND run_id = ?2",
                    )?
                    .query_row(params![ns, run_id], |r| r.get(0))?;
                let expired: Option<i64> = conn
                    .prepare_cached(
                        "SELECT expired_through FROM run_expiry WHERE ns = ?1 AND run_id = ?2",
                    )?
                    .query_row(params![ns, run_id], |r| r.get(0))
                    .optional()?;
                Ok(RunPositions::from_stored(max, expired))
            })
        })
    }

    fn prune_batch(
        &self,
        ended_before_ms: i64,
        batch: usize,
    ) -> BoxFuture<'_, Result<PruneReport, StoreError>> {
        Box::pin(self.write_with(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT r.ns, r.run_id, (SELECT max(seq) FROM run_events e \
                   WHERE e.ns = r.ns AND e.run_id = r.run_id) AS last \
                 FROM runs r \
                 WHERE json_extract(r.doc, '$.status') IN {TERMINAL} \
                   AND coalesce(json_extract(r.doc, '$.endedAt'), json_extract(r.doc, '$.updatedAt')) < ?1 \
                   AND last IS NOT NULL \
                 LIMIT ?2"
            ))?;
            let runs = stmt
                .query_map(params![ended_before_ms, batch as i64], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?))
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
                let mut vacuum =
                    conn.prepare(&format!("PRAGMA incremental_vacuum({VACUUM_PAGES_PER_BATCH})"))?;
                let mut rows = vacuum.query([])?;
                while rows.next()?.is_some() {}
            }
            Ok(report)
        }))
    }

    fn interrupt_running_tool_calls(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
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
