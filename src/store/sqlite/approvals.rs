//! [`ApprovalRecords`] on SQLite: the `approvals` table of migrations 0003 and 0004.

use rusqlite::{params, OptionalExtension, Row};

use super::SqliteStore;
use crate::store::approvals::{ApprovalChange, ApprovalRecord, ApprovalRecords};
use crate::store::{BoxFuture, Namespace, StoreError};

const COLUMNS: &str = "id, ns, agent_id, run_id, tool, tool_call_id, args, created_at, \
                       expires_at, state, decided_by, decided_at, reason, owner, lease_until, \
                       approved_args";

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
        owner: r.get(13)?,
        lease_until_ms: r.get(14)?,
        approved_args: r
            .get::<_, Option<String>>(15)?
            .and_then(|a| serde_json::from_str(&a).ok()),
    })
}

impl ApprovalRecords for SqliteStore {
    fn insert_approval(&self, rec: ApprovalRecord) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.write_with(move |conn| {
            conn.prepare_cached(&format!(
                "INSERT INTO approvals ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, \
                 ?11, ?12, ?13, ?14, ?15, ?16)"
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
                rec.reason,
                rec.owner,
                rec.lease_until_ms,
                rec.approved_args.as_ref().map(|a| a.to_string()),
            ])?;
            Ok(())
        }))
    }

    fn change_approval(&self, c: ApprovalChange) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(self.write_with(move |conn| {
            let from = serde_json::to_string(c.from).unwrap_or_default();
            let n = conn
                .prepare_cached(
                    "UPDATE approvals SET state = ?2, decided_by = ?3, reason = ?4, decided_at = ?5, \
                     approved_args = ?6 \
                     WHERE id = ?1 AND state IN (SELECT value FROM json_each(?7))",
                )?
                .execute(params![
                    c.id,
                    c.state,
                    c.by,
                    c.reason,
                    c.at_ms,
                    c.approved_args.as_ref().map(|a| a.to_string()),
                    from
                ])?;
            Ok(n == 1)
        }))
    }

    fn renew_approval_leases(
        &self,
        owner: &str,
        until_ms: i64,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        let owner = owner.to_string();
        Box::pin(self.write_with(move |conn| {
            Ok(conn
                .prepare_cached(
                    "UPDATE approvals SET lease_until = ?2 WHERE owner = ?1 AND state = 'pending'",
                )?
                .execute(params![owner, until_ms])? as u64)
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

    fn cancel_abandoned_approvals(
        &self,
        reason: &str,
        now_ms: i64,
    ) -> BoxFuture<'_, Result<Vec<ApprovalRecord>, StoreError>> {
        let reason = reason.to_string();
        Box::pin(self.write_with(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "UPDATE approvals SET state = 'cancelled', decided_by = 'callbackd', \
                 reason = ?1, decided_at = ?2 WHERE state = 'pending' AND lease_until < ?2 \
                 RETURNING {COLUMNS}"
            ))?;
            let rows = stmt.query_map(params![reason, now_ms], record)?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        }))
    }
}
