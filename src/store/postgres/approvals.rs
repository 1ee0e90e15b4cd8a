//! [`ApprovalRecords`](crate::store::approvals::ApprovalRecords) on PostgreSQL: the shared SQL
//! of `store::sql::approvals`, and a `NOTIFY` with each change, sent in the transaction that
//! makes it (so it is heard only if it committed): the daemon holding the call wakes at
//! once wherever the decision was made (`approvals::wake`).

use super::{listen, PgStore};
use crate::store::approvals::ApprovalChange;
use crate::store::sql::{Exec, Value};
use crate::store::{sql, BoxFuture, StoreError};

sql::approvals::impl_approval_records!(PgStore);

impl PgStore {
    fn approval_change(&self, c: ApprovalChange) -> BoxFuture<'_, Result<bool, StoreError>> {
        let payload =
            listen::approval_payload(&self.inner.instance, &self.inner.schema, &c.ns, &c.id);
        let outbox = self.notices().outbox_arc();
        self.sql_write(move |x| {
            let (c, payload, outbox) = (c.clone(), payload.clone(), outbox.clone());
            Box::pin(async move {
                let changed = sql::approvals::change(x, &c, outbox.as_deref()).await?;
                if changed {
                    let notify = "SELECT pg_notify($1, $2)";
                    let params = [Value::Text(listen::CHANNEL), Value::Text(&payload)];
                    Exec::execute(x, notify, &params).await?;
                }
                Ok(changed)
            })
        })
    }
}
