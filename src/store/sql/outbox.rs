//! [`OutboxRecords`](crate::store::outbox::OutboxRecords): the `webhook_outbox` table of
//! migration 0009, written once for both backends; and [`record`], which a write calls in
//! its own transaction with what it did.

use super::{sql, Exec, Row, Value};
use crate::store::outbox::{Claim, Composer, Delivery, Happening, OutboxEntry, Settle};
use crate::store::StoreError;

/// Every column, in the order [`delivery`] reads them.
macro_rules! columns {
    () => {
        "id, url, ns, type, run_id, body, created_at, state, attempts, next_at, last_status, \
         last_error, last_at"
    };
}

fn delivery(r: &dyn Row) -> Result<Delivery, StoreError> {
    Ok(Delivery {
        entry: OutboxEntry {
            id: r.text(0)?.to_string(),
            url: r.text(1)?.to_string(),
            ns: r.text(2)?.to_string(),
            kind: r.text(3)?.to_string(),
            run_id: r.opt_text(4)?.map(str::to_string),
            body: r.text(5)?.to_string(),
            created_at_ms: r.int(6)?,
        },
        state: r.text(7)?.to_string(),
        attempts: r.int(8)?,
        next_at_ms: r.int(9)?,
        last_status: r.opt_int(10)?,
        last_error: r.opt_text(11)?.map(str::to_string),
        last_at_ms: r.opt_int(12)?,
    })
}

/// Records the deliveries `composer` makes of `happening`, in the caller's transaction. An
/// event already recorded (same id and endpoint) is left as it is.
pub async fn record<X: Exec>(
    x: &X,
    composer: Option<&dyn Composer>,
    happening: &Happening<'_>,
) -> Result<(), X::Error> {
    let Some(composer) = composer else {
        return Ok(());
    };
    for e in composer.compose(happening) {
        insert(x, &e).await?;
    }
    Ok(())
}

async fn insert<X: Exec>(x: &X, e: &OutboxEntry) -> Result<(), X::Error> {
    let sql = sql!(
        "INSERT INTO webhook_outbox (id, url, ns, type, run_id, body, created_at, next_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7) ON CONFLICT (id, url) DO NOTHING"
    );
    let params = [
        Value::Text(&e.id),
        Value::Text(&e.url),
        Value::Text(&e.ns),
        Value::Text(&e.kind),
        Value::OptText(e.run_id.as_deref()),
        Value::Text(&e.body),
        Value::Int(e.created_at_ms),
    ];
    x.execute(sql.get(X::DIALECT), &params).await?;
    Ok(())
}

/// Claims due deliveries of the known endpoints: on PostgreSQL the rows are locked with
/// `SKIP LOCKED` first, so two daemons claiming at once take different rows.
pub async fn claim<X: Exec>(x: &X, c: &Claim) -> Result<Vec<Delivery>, X::Error> {
    let d = X::DIALECT;
    let sql = format!(
        "UPDATE webhook_outbox SET claim_owner = {owner}, claim_until = {until} \
         WHERE (id, url) IN (SELECT id, url FROM webhook_outbox \
         WHERE state = 'pending' AND next_at <= {now} AND claim_until < {now} AND {urls} \
         ORDER BY next_at LIMIT {limit}{lock}) \
         AND claim_until < {now} RETURNING {cols}",
        owner = d.param(1),
        until = d.param(2),
        now = d.param(3),
        urls = d.in_list("url", 4),
        limit = d.param(5),
        lock = d.skip_locked(),
        cols = columns!(),
    );
    let params = [
        Value::Text(&c.owner),
        Value::Int(c.until_ms),
        Value::Int(c.now_ms),
        Value::TextList(&c.urls),
        Value::Int(c.limit),
    ];
    x.all(&sql, &params, delivery).await
}

/// Settles a claimed delivery; whether the claim still held.
pub async fn settle<X: Exec>(x: &X, s: &Settle) -> Result<bool, X::Error> {
    let sql = sql!(
        "UPDATE webhook_outbox SET state = ?4, attempts = attempts + 1, next_at = ?5, \
         last_status = ?6, last_error = ?7, last_at = ?8, claim_owner = NULL, claim_until = 0 \
         WHERE id = ?1 AND url = ?2 AND claim_owner = ?3"
    );
    let params = [
        Value::Text(&s.id),
        Value::Text(&s.url),
        Value::Text(&s.owner),
        Value::Text(s.state),
        Value::Int(s.next_at_ms),
        Value::OptInt(s.status),
        Value::OptText(s.error.as_deref()),
        Value::Int(s.at_ms),
    ];
    Ok(x.execute(sql.get(X::DIALECT), &params).await? == 1)
}

/// The namespace's deliveries, newest first.
pub async fn list<X: Exec>(
    x: &X,
    ns: &str,
    state: Option<&str>,
    limit: i64,
) -> Result<Vec<Delivery>, X::Error> {
    let all = sql!(concat!(
        "SELECT ",
        columns!(),
        " FROM webhook_outbox WHERE ns = ?1 ORDER BY created_at DESC, id DESC, url LIMIT ?2"
    ));
    let one = sql!(concat!(
        "SELECT ",
        columns!(),
        " FROM webhook_outbox WHERE ns = ?1 AND state = ?3 \
         ORDER BY created_at DESC, id DESC, url LIMIT ?2"
    ));
    match state {
        None => {
            let params = [Value::Text(ns), Value::Int(limit)];
            x.all(all.get(X::DIALECT), &params, delivery).await
        }
        Some(state) => {
            let params = [Value::Text(ns), Value::Int(limit), Value::Text(state)];
            x.all(one.get(X::DIALECT), &params, delivery).await
        }
    }
}

pub async fn pending<X: Exec>(x: &X) -> Result<i64, X::Error> {
    let sql = sql!("SELECT count(*) FROM webhook_outbox WHERE state = 'pending'");
    Ok(x.first(sql.get(X::DIALECT), &[], |r| r.int(0))
        .await?
        .unwrap_or(0))
}

pub async fn prune<X: Exec>(x: &X, before_ms: i64) -> Result<u64, X::Error> {
    let sql = sql!("DELETE FROM webhook_outbox WHERE state <> 'pending' AND created_at < ?1");
    x.execute(sql.get(X::DIALECT), &[Value::Int(before_ms)])
        .await
}

/// `impl OutboxRecords for $store`, for a backend with `sql_read` / `sql_write`.
macro_rules! impl_outbox_records {
    ($store:ty) => {
        impl $crate::store::outbox::OutboxRecords for $store {
            fn claim_deliveries(
                &self,
                claim: $crate::store::outbox::Claim,
            ) -> $crate::store::BoxFuture<
                '_,
                Result<Vec<$crate::store::outbox::Delivery>, $crate::store::StoreError>,
            > {
                self.sql_write(move |x| {
                    let claim = claim.clone();
                    Box::pin(async move { $crate::store::sql::outbox::claim(x, &claim).await })
                })
            }

            fn settle_delivery(
                &self,
                settle: $crate::store::outbox::Settle,
            ) -> $crate::store::BoxFuture<'_, Result<bool, $crate::store::StoreError>> {
                self.sql_write(move |x| {
                    let settle = settle.clone();
                    Box::pin(async move { $crate::store::sql::outbox::settle(x, &settle).await })
                })
            }

            fn deliveries(
                &self,
                ns: &$crate::store::Namespace,
                state: Option<&str>,
                limit: i64,
            ) -> $crate::store::BoxFuture<
                '_,
                Result<Vec<$crate::store::outbox::Delivery>, $crate::store::StoreError>,
            > {
                let (ns, state) = (ns.as_str().to_string(), state.map(str::to_string));
                self.sql_read(move |x| {
                    let (ns, state) = (ns.clone(), state.clone());
                    Box::pin(async move {
                        $crate::store::sql::outbox::list(x, &ns, state.as_deref(), limit).await
                    })
                })
            }

            fn pending_deliveries(
                &self,
            ) -> $crate::store::BoxFuture<'_, Result<i64, $crate::store::StoreError>> {
                self.sql_read(move |x| {
                    Box::pin(async move { $crate::store::sql::outbox::pending(x).await })
                })
            }

            fn prune_deliveries(
                &self,
                before_ms: i64,
            ) -> $crate::store::BoxFuture<'_, Result<u64, $crate::store::StoreError>> {
                self.sql_write(move |x| {
                    Box::pin(async move { $crate::store::sql::outbox::prune(x, before_ms).await })
                })
            }
        }
    };
}
pub(crate) use impl_outbox_records;
