//! [`ApprovalRecords`](crate::store::approvals::ApprovalRecords): the `approvals` table of
//! migrations 0003, 0004 and 0007, written once for both backends. What a backend adds is
//! its own: PostgreSQL announces each change with a `NOTIFY` in the same transaction, so
//! that the daemon holding the call hears a decision made through another one.

use super::{sql, Exec, Row, Value};
use crate::store::approvals::{ApprovalChange, ApprovalRecord};
use crate::store::outbox::{Composer, Happening};
use crate::store::{Namespace, StoreError};

/// Every column, in the order [`record`] reads them.
macro_rules! columns {
    () => {
        "id, ns, agent_id, run_id, tool, tool_call_id, args, created_at, expires_at, state, \
         decided_by, decided_at, reason, owner, lease_until, approved_args, confirm"
    };
}

fn record(r: &dyn Row) -> Result<ApprovalRecord, StoreError> {
    let json = |t: &str| serde_json::from_str(t).unwrap_or(serde_json::Value::Null);
    Ok(ApprovalRecord {
        id: r.text(0)?.to_string(),
        ns: Namespace::new(r.text(1)?),
        agent_id: r.text(2)?.to_string(),
        run_id: r.opt_text(3)?.map(str::to_string),
        tool: r.text(4)?.to_string(),
        tool_call_id: r.opt_text(5)?.map(str::to_string),
        args: json(r.text(6)?),
        created_at_ms: r.int(7)?,
        expires_at_ms: r.int(8)?,
        state: r.text(9)?.to_string(),
        decided_by: r.opt_text(10)?.map(str::to_string),
        decided_at_ms: r.opt_int(11)?,
        reason: r.opt_text(12)?.map(str::to_string),
        owner: r.text(13)?.to_string(),
        lease_until_ms: r.int(14)?,
        approved_args: r.opt_text(15)?.and_then(|a| serde_json::from_str(a).ok()),
        confirm: r.bool(16)?,
    })
}

/// Inserts a held call's approval, and the webhooks saying it waits (`outbox`), in one
/// transaction.
pub async fn insert<X: Exec>(
    x: &X,
    rec: &ApprovalRecord,
    outbox: Option<&dyn Composer>,
) -> Result<(), X::Error> {
    let sql = sql!(concat!(
        "INSERT INTO approvals (",
        columns!(),
        ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)"
    ));
    let args = rec.args.to_string();
    let approved = rec.approved_args.as_ref().map(|a| a.to_string());
    let params = [
        Value::Text(&rec.id),
        Value::Text(rec.ns.as_str()),
        Value::Text(&rec.agent_id),
        Value::OptText(rec.run_id.as_deref()),
        Value::Text(&rec.tool),
        Value::OptText(rec.tool_call_id.as_deref()),
        Value::Text(&args),
        Value::Int(rec.created_at_ms),
        Value::Int(rec.expires_at_ms),
        Value::Text(&rec.state),
        Value::OptText(rec.decided_by.as_deref()),
        Value::OptInt(rec.decided_at_ms),
        Value::OptText(rec.reason.as_deref()),
        Value::Text(&rec.owner),
        Value::Int(rec.lease_until_ms),
        Value::OptText(approved.as_deref()),
        Value::Bool(rec.confirm),
    ];
    x.execute(sql.get(X::DIALECT), &params).await?;
    super::outbox::record(x, outbox, &Happening::ApprovalRequired(rec)).await
}

/// Applies `c` if the approval is in one of its `from` states; whether it did. A change out
/// of `pending` records the webhooks saying how it was resolved, in the same transaction.
pub async fn change<X: Exec>(
    x: &X,
    c: &ApprovalChange,
    outbox: Option<&dyn Composer>,
) -> Result<bool, X::Error> {
    let sql = format!(
        "UPDATE approvals SET state = {}, decided_by = {}, reason = {}, decided_at = {}, \
         approved_args = {} WHERE ns = {} AND id = {} AND {} RETURNING {}",
        X::DIALECT.param(1),
        X::DIALECT.param(2),
        X::DIALECT.param(3),
        X::DIALECT.param(4),
        X::DIALECT.param(5),
        X::DIALECT.param(6),
        X::DIALECT.param(7),
        X::DIALECT.in_list("state", 8),
        columns!()
    );
    let approved = c.approved_args.as_ref().map(|a| a.to_string());
    let from: Vec<String> = c.from.iter().map(|s| s.to_string()).collect();
    let params = [
        Value::Text(c.state),
        Value::OptText(c.by.as_deref()),
        Value::OptText(c.reason.as_deref()),
        Value::Int(c.at_ms),
        Value::OptText(approved.as_deref()),
        Value::Text(c.ns.as_str()),
        Value::Text(&c.id),
        Value::TextList(&from),
    ];
    let Some(rec) = x.first(&sql, &params, record).await? else {
        return Ok(false);
    };
    if c.from.contains(&"pending") {
        super::outbox::record(x, outbox, &Happening::ApprovalResolved(&rec)).await?;
    }
    Ok(true)
}

/// Renews the lease of `owner`'s pending approvals; how many.
pub async fn renew_leases<X: Exec>(x: &X, owner: &str, until_ms: i64) -> Result<u64, X::Error> {
    let sql = sql!("UPDATE approvals SET lease_until = ?2 WHERE owner = ?1 AND state = 'pending'");
    x.execute(
        sql.get(X::DIALECT),
        &[Value::Text(owner), Value::Int(until_ms)],
    )
    .await
}

pub async fn get<X: Exec>(x: &X, ns: &str, id: &str) -> Result<Option<ApprovalRecord>, X::Error> {
    let sql = sql!(concat!(
        "SELECT ",
        columns!(),
        " FROM approvals WHERE ns = ?1 AND id = ?2"
    ));
    x.first(
        sql.get(X::DIALECT),
        &[Value::Text(ns), Value::Text(id)],
        record,
    )
    .await
}

/// The namespace's approvals in `state` (every state when `None`), oldest first.
pub async fn list<X: Exec>(
    x: &X,
    ns: &str,
    state: Option<&str>,
) -> Result<Vec<ApprovalRecord>, X::Error> {
    let all = sql!(concat!(
        "SELECT ",
        columns!(),
        " FROM approvals WHERE ns = ?1 ORDER BY created_at, id"
    ));
    let one = sql!(concat!(
        "SELECT ",
        columns!(),
        " FROM approvals WHERE ns = ?1 AND state = ?2 ORDER BY created_at, id"
    ));
    match state {
        None => x.all(all.get(X::DIALECT), &[Value::Text(ns)], record).await,
        Some(state) => {
            let params = [Value::Text(ns), Value::Text(state)];
            x.all(one.get(X::DIALECT), &params, record).await
        }
    }
}

/// The approvals of one run, oldest first (index `approvals_by_run`).
pub async fn of_run<X: Exec>(
    x: &X,
    ns: &str,
    run_id: &str,
) -> Result<Vec<ApprovalRecord>, X::Error> {
    let sql = sql!(concat!(
        "SELECT ",
        columns!(),
        " FROM approvals WHERE ns = ?1 AND run_id = ?2 ORDER BY created_at, id"
    ));
    let params = [Value::Text(ns), Value::Text(run_id)];
    x.all(sql.get(X::DIALECT), &params, record).await
}

/// Cancels the pending approvals whose lease ran out before `now_ms`; the records changed.
pub async fn cancel_abandoned<X: Exec>(
    x: &X,
    reason: &str,
    now_ms: i64,
    outbox: Option<&dyn Composer>,
) -> Result<Vec<ApprovalRecord>, X::Error> {
    let sql = sql!(concat!(
        "UPDATE approvals SET state = 'cancelled', decided_by = 'callbackd', reason = ?1, \
         decided_at = ?2 WHERE state = 'pending' AND lease_until < ?2 RETURNING ",
        columns!()
    ));
    let cancelled = x
        .all(
            sql.get(X::DIALECT),
            &[Value::Text(reason), Value::Int(now_ms)],
            record,
        )
        .await?;
    for rec in &cancelled {
        super::outbox::record(x, outbox, &Happening::ApprovalResolved(rec)).await?;
    }
    Ok(cancelled)
}

/// `impl ApprovalRecords for $store`, for a store with `sql_read` and `sql_write` and its own
/// `approval_change` (the shared [`change`], plus whatever the backend announces with it).
macro_rules! impl_approval_records {
    ($store:ty) => {
        impl $crate::store::approvals::ApprovalRecords for $store {
            fn insert_approval(
                &self,
                rec: $crate::store::approvals::ApprovalRecord,
            ) -> $crate::store::BoxFuture<'_, Result<(), $crate::store::StoreError>> {
                let outbox = self.notices().outbox_arc();
                self.sql_write(move |x| {
                    let (rec, outbox) = (rec.clone(), outbox.clone());
                    Box::pin(async move {
                        $crate::store::sql::approvals::insert(x, &rec, outbox.as_deref()).await
                    })
                })
            }

            fn change_approval(
                &self,
                change: $crate::store::approvals::ApprovalChange,
            ) -> $crate::store::BoxFuture<'_, Result<bool, $crate::store::StoreError>> {
                self.approval_change(change)
            }

            fn renew_approval_leases(
                &self,
                owner: &str,
                until_ms: i64,
            ) -> $crate::store::BoxFuture<'_, Result<u64, $crate::store::StoreError>> {
                let [owner] = $crate::store::sql::owned([owner]);
                self.sql_write(move |x| {
                    let owner = owner.clone();
                    Box::pin(async move {
                        $crate::store::sql::approvals::renew_leases(x, &owner, until_ms).await
                    })
                })
            }

            fn approval(
                &self,
                ns: &$crate::store::Namespace,
                id: &str,
            ) -> $crate::store::BoxFuture<
                '_,
                Result<Option<$crate::store::approvals::ApprovalRecord>, $crate::store::StoreError>,
            > {
                let args = $crate::store::sql::owned([ns.as_str(), id]);
                self.sql_read(move |x| {
                    let [ns, id] = args.clone();
                    Box::pin(async move { $crate::store::sql::approvals::get(x, &ns, &id).await })
                })
            }

            fn approvals(
                &self,
                ns: &$crate::store::Namespace,
                state: Option<&str>,
            ) -> $crate::store::BoxFuture<
                '_,
                Result<Vec<$crate::store::approvals::ApprovalRecord>, $crate::store::StoreError>,
            > {
                let (ns, state) = (ns.as_str().to_string(), state.map(str::to_string));
                self.sql_read(move |x| {
                    let (ns, state) = (ns.clone(), state.clone());
                    Box::pin(async move {
                        $crate::store::sql::approvals::list(x, &ns, state.as_deref()).await
                    })
                })
            }

            fn approvals_of_run(
                &self,
                ns: &$crate::store::Namespace,
                run_id: &str,
            ) -> $crate::store::BoxFuture<
                '_,
                Result<Vec<$crate::store::approvals::ApprovalRecord>, $crate::store::StoreError>,
            > {
                let args = $crate::store::sql::owned([ns.as_str(), run_id]);
                self.sql_read(move |x| {
                    let [ns, run_id] = args.clone();
                    Box::pin(
                        async move { $crate::store::sql::approvals::of_run(x, &ns, &run_id).await },
                    )
                })
            }

            fn cancel_abandoned_approvals(
                &self,
                reason: &str,
                now_ms: i64,
            ) -> $crate::store::BoxFuture<
                '_,
                Result<Vec<$crate::store::approvals::ApprovalRecord>, $crate::store::StoreError>,
            > {
                let [reason] = $crate::store::sql::owned([reason]);
                let outbox = self.notices().outbox_arc();
                self.sql_write(move |x| {
                    let (reason, outbox) = (reason.clone(), outbox.clone());
                    Box::pin(async move {
                        $crate::store::sql::approvals::cancel_abandoned(
                            x,
                            &reason,
                            now_ms,
                            outbox.as_deref(),
                        )
                        .await
                    })
                })
            }
        }
    };
}
pub(crate) use impl_approval_records;
