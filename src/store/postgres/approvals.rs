//! [`ApprovalRecords`] on PostgreSQL: the `approvals` table of migration 0003, with the
//! SQLite backend's semantics, except that a starting daemon cancels only the pending
//! approvals of daemons that are gone (the others still wait in a live daemon).

use tokio_postgres::types::Type;
use tokio_postgres::Row;

use super::records::gone_owner;
use super::PgStore;
use crate::store::approvals::{ApprovalRecord, ApprovalRecords};
use crate::store::{BoxFuture, Namespace, StoreError};

const COLUMNS: &str = "id, ns, agent_id, run_id, tool, tool_call_id, args, created_at, \
                       expires_at, state, decided_by, decided_at, reason";

fn record(r: &Row) -> ApprovalRecord {
    let args: &str = r.get(6);
    ApprovalRecord {
        id: r.get(0),
        ns: Namespace::new(r.get(1)),
        agent_id: r.get(2),
        run_id: r.get(3),
        tool: r.get(4),
        tool_call_id: r.get(5),
        args: serde_json::from_str(args).unwrap_or(serde_json::Value::Null),
        created_at_ms: r.get(7),
        expires_at_ms: r.get(8),
        state: r.get(9),
        decided_by: r.get(10),
        decided_at_ms: r.get(11),
        reason: r.get(12),
    }
}

impl ApprovalRecords for PgStore {
    fn insert_approval(&self, rec: ApprovalRecord) -> BoxFuture<'_, Result<(), StoreError>> {
        let owner = self.inner.instance.clone();
        self.run_tx(move |db| {
            let (rec, owner) = (rec.clone(), owner.clone());
            Box::pin(async move {
                let args = rec.args.to_string();
                db.execute(
                    &format!(
                        "INSERT INTO approvals ({COLUMNS}, owner) VALUES ($1, $2, $3, $4, $5, $6, \
                         $7, $8, $9, $10, $11, $12, $13, $14)"
                    ),
                    &[
                        (&rec.id, Type::TEXT),
                        (&rec.ns.as_str(), Type::TEXT),
                        (&rec.agent_id, Type::TEXT),
                        (&rec.run_id, Type::TEXT),
                        (&rec.tool, Type::TEXT),
                        (&rec.tool_call_id, Type::TEXT),
                        (&args, Type::TEXT),
                        (&rec.created_at_ms, Type::INT8),
                        (&rec.expires_at_ms, Type::INT8),
                        (&rec.state, Type::TEXT),
                        (&rec.decided_by, Type::TEXT),
                        (&rec.decided_at_ms, Type::INT8),
                        (&rec.reason, Type::TEXT),
                        (&owner, Type::TEXT),
                    ],
                )
                .await?;
                Ok(())
            })
        })
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
        self.run_tx(move |db| {
            let (id, by, reason) = (id.clone(), by.clone(), reason.clone());
            Box::pin(async move {
                let n = db
                    .execute(
                        "UPDATE approvals SET state = $2, decided_by = $3, reason = $4, \
                         decided_at = $5 WHERE id = $1 AND state = 'pending'",
                        &[
                            (&id, Type::TEXT),
                            (&state, Type::TEXT),
                            (&by, Type::TEXT),
                            (&reason, Type::TEXT),
                            (&at_ms, Type::INT8),
                        ],
                    )
                    .await?;
                Ok(n == 1)
            })
        })
    }

    fn approval(
        &self,
        ns: &Namespace,
        id: &str,
    ) -> BoxFuture<'_, Result<Option<ApprovalRecord>, StoreError>> {
        let (ns, id) = (ns.as_str().to_string(), id.to_string());
        self.run_read(move |db| {
            let (ns, id) = (ns.clone(), id.clone());
            Box::pin(async move {
                let row = db
                    .query_opt(
                        &format!("SELECT {COLUMNS} FROM approvals WHERE ns = $1 AND id = $2"),
                        &[(&ns, Type::TEXT), (&id, Type::TEXT)],
                    )
                    .await?;
                Ok(row.as_ref().map(record))
            })
        })
    }

    fn approvals(
        &self,
        ns: &Namespace,
        state: Option<&str>,
    ) -> BoxFuture<'_, Result<Vec<ApprovalRecord>, StoreError>> {
        let (ns, state) = (ns.as_str().to_string(), state.map(str::to_string));
        self.run_read(move |db| {
            let (ns, state) = (ns.clone(), state.clone());
            Box::pin(async move {
                let rows = db
                    .query(
                        &format!(
                            "SELECT {COLUMNS} FROM approvals WHERE ns = $1 \
                             AND ($2::text IS NULL OR state = $2) ORDER BY created_at, id"
                        ),
                        &[(&ns, Type::TEXT), (&state, Type::TEXT)],
                    )
                    .await?;
                Ok(rows.iter().map(record).collect())
            })
        })
    }

    fn cancel_pending_approvals(&self, reason: &str) -> BoxFuture<'_, Result<u64, StoreError>> {
        let reason = reason.to_string();
        self.run_tx(move |db| {
            let reason = reason.clone();
            Box::pin(async move {
                let n = db
                    .execute(
                        &format!(
                            "UPDATE approvals SET state = 'cancelled', decided_by = 'callbackd', \
                             reason = $1, decided_at = $2 WHERE state = 'pending' AND {}",
                            gone_owner()
                        ),
                        &[
                            (&reason, Type::TEXT),
                            (&crate::store::event_doc::now_ms(), Type::INT8),
                        ],
                    )
                    .await?;
                Ok(n)
            })
        })
    }
}
