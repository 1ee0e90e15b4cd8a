//! [`ApprovalRecords`] on PostgreSQL: the `approvals` table of migrations 0003 and 0004, with
//! the SQLite backend's semantics: a pending approval belongs to the daemon that holds its
//! call (`owner`) for as long as that daemon renews its lease.

use tokio_postgres::types::Type;
use tokio_postgres::Row;

use super::PgStore;
use crate::store::approvals::{ApprovalChange, ApprovalRecord, ApprovalRecords};
use crate::store::{BoxFuture, Namespace, StoreError};

const COLUMNS: &str = "id, ns, agent_id, run_id, tool, tool_call_id, args, created_at, \
                       expires_at, state, decided_by, decided_at, reason, owner, lease_until, \
                       approved_args";

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
        owner: r.get(13),
        lease_until_ms: r.get(14),
        approved_args: r
            .get::<_, Option<&str>>(15)
            .and_then(|a| serde_json::from_str(a).ok()),
    }
}

impl ApprovalRecords for PgStore {
    fn insert_approval(&self, rec: ApprovalRecord) -> BoxFuture<'_, Result<(), StoreError>> {
        self.run_tx(move |db| {
            let rec = rec.clone();
            Box::pin(async move {
                let args = rec.args.to_string();
                let approved = rec.approved_args.as_ref().map(|a| a.to_string());
                db.execute(
                    &format!(
                        "INSERT INTO approvals ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, \
                         $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)"
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
                        (&rec.owner, Type::TEXT),
                        (&rec.lease_until_ms, Type::INT8),
                        (&approved, Type::TEXT),
                    ],
                )
                .await?;
                Ok(())
            })
        })
    }

    fn change_approval(&self, c: ApprovalChange) -> BoxFuture<'_, Result<bool, StoreError>> {
        self.run_tx(move |db| {
            let c = c.clone();
            Box::pin(async move {
                let approved = c.approved_args.as_ref().map(|a| a.to_string());
                let from: Vec<String> = c.from.iter().map(|s| s.to_string()).collect();
                let n = db
                    .execute(
                        "UPDATE approvals SET state = $2, decided_by = $3, reason = $4, \
                         decided_at = $5, approved_args = $6 WHERE id = $1 AND state = ANY($7)",
                        &[
                            (&c.id, Type::TEXT),
                            (&c.state, Type::TEXT),
                            (&c.by, Type::TEXT),
                            (&c.reason, Type::TEXT),
                            (&c.at_ms, Type::INT8),
                            (&approved, Type::TEXT),
                            (&from, Type::TEXT_ARRAY),
                        ],
                    )
                    .await?;
                Ok(n == 1)
            })
        })
    }

    fn renew_approval_leases(
        &self,
        owner: &str,
        until_ms: i64,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        let owner = owner.to_string();
        self.run_tx(move |db| {
            let owner = owner.clone();
            Box::pin(async move {
                Ok(db
                    .execute(
                        "UPDATE approvals SET lease_until = $2 WHERE owner = $1 AND state = 'pending'",
                        &[(&owner, Type::TEXT), (&until_ms, Type::INT8)],
                    )
                    .await?)
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

    fn cancel_abandoned_approvals(
        &self,
        reason: &str,
        now_ms: i64,
    ) -> BoxFuture<'_, Result<Vec<ApprovalRecord>, StoreError>> {
        let reason = reason.to_string();
        self.run_tx(move |db| {
            let reason = reason.clone();
            Box::pin(async move {
                let rows = db
                    .query(
                        &format!(
                            "UPDATE approvals SET state = 'cancelled', decided_by = 'callbackd', \
                             reason = $1, decided_at = $2 \
                             WHERE state = 'pending' AND lease_until < $2 RETURNING {COLUMNS}"
                        ),
                        &[(&reason, Type::TEXT), (&now_ms, Type::INT8)],
                    )
                    .await?;
                Ok(rows.iter().map(record).collect())
            })
        })
    }
}
