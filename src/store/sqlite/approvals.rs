//! [`ApprovalRecords`] on SQLite: the `approvals` table of migration 0003.

use rusqlite::{params, OptionalExtension, Row};

use super::SqliteStore;
use crate::store::approvals::{ApprovalRecord, ApprovalRecords};
use crate::store::{BoxFuture, Namespace, StoreError};

const COLUMNS: &str = "id, ns, agent_id, run_id, tool, tool_call_id, args, created_at, \
                       expires_at, state, decided_by, decided_at, reason";

fn record(r: &Row<'_>) -> rusqlite::Result<ApprovalRecord> {
    let args: String = r.get(6)?;
    Ok(ApprovalRecord {
        id: r.get(0)?,
        ns: Namespace::new(&r.get::<_, String>(1)?),
        agent_id: r.get(2)?,
        run_id: r.get(3)?,
        tool: r.get(4)?,
        tool_call_id: r.get(5)?,
        args: serde_json::from_str(&args).unwrap_or(serde_json::Value::Null),
        created_at_ms: r.get(7)?,
        expires_at_ms: r.get(8)?,
        state: r.get(9)?,
        decided_by: r.get(10)?,
        decided_at_ms: r.get(11)?,
        reason: r.get(12)?,
    })
}

impl ApprovalRecords for SqliteStore {
    fn insert_approval(&self, rec: ApprovalRecord) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.write_with(move |conn| {
            conn.prepare_cached(&format!(
                "INSERT INTO approvals ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, \
                 ?11, ?12, ?13)"
            ))?
            .execute(params![
                rec.id,
                rec.ns.as_str(),
                rec.agent_id,
                rec.run_id,
                rec.tool,
                rec.tool_call_id,
                rec.args.to_string(),
                rec.created_at_ms,
                rec.expires_at_ms,
                rec.state,
                rec.decided_by,
                rec.decided_at_ms,
                rec.reason
            ])?;
            Ok(())
        }))
    }

    fn decide_approval(
        &self,
        id: &str,
        state: &'static str,
        by: Option<String>,
        reason: Option<String>,
        at_ms: i64,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        let id = id.to_string();
        Box::pin(self.write_with(move |conn| {
            let n = conn
                .prepare_cached(
                    "UPDATE approvals SET state = ?2, decided_by = ?3, reason = ?4, decided_at = ?5 \
                     WHERE id = ?1 AND state = 'pending'",
                )?
                .execute(params![id, state, by, reason, at_ms])?;
            Ok(n == 1)
        }))
    }

    fn approval(
        &self,
        ns: &Namespace,
        id: &str,
    ) -> BoxFuture<'_, Result<Option<ApprovalRecord>, StoreError>> {
        let (ns, id) = (ns.as_str().to_string(), id.to_string());
        Box::pin(async move {
            self.readers.with(|conn| {
                Ok(conn
                    .prepare_cached(&format!(
                        "SELECT {COLUMNS} FROM approvals WHERE ns = ?1 AND id = ?2"
                    ))?
                    .query_row(params![ns, id], record)
                    .optional()?)
            })
        })
    }

    fn approvals(
        &self,
        ns: &Namespace,
        state: Option<&str>,
    ) -> BoxFuture<'_, Result<Vec<ApprovalRecord>, StoreError>> {
        let (ns, state) = (ns.as_str().to_string(), state.map(str::to_string));
        Box::pin(async move {
            self.readers.with(|conn| {
                let mut stmt = conn.prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM approvals WHERE ns = ?1 AND (?2 IS NULL OR state = ?2) \
                     ORDER BY created_at, id"
                ))?;
                let rows = stmt.query_map(params![ns, state], record)?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            })
        })
    }

    fn cancel_pending_approvals(&self, reason: &str) -> BoxFuture<'_, Result<u64, StoreError>> {
        let reason = reason.to_string();
        Box::pin(self.write_with(move |conn| {
            Ok(conn
                .prepare_cached(
                    "UPDATE approvals SET state = 'cancelled', decided_by = 'callbackd', \
                     reason = ?1, decided_at = ?2 WHERE state = 'pending'",
                )?
                .execute(params![reason, crate::store::event_doc::now_ms()])? as u64)
        }))
    }
}
