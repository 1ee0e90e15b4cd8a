//! [`ApprovalRecords`](crate::store::approvals::ApprovalRecords) on SQLite: the shared SQL of
//! `store::sql::approvals`, run through the writer. Nothing announces a change: another
//! daemon on the same file hears a decision by its holder's poll.

use super::SqliteStore;
use crate::store::approvals::ApprovalChange;
use crate::store::{sql, BoxFuture, StoreError};

sql::approvals::impl_approval_records!(SqliteStore);

impl SqliteStore {
    fn approval_change(&self, c: ApprovalChange) -> BoxFuture<'_, Result<bool, StoreError>> {
        let outbox = self.notices().outbox_arc();
        self.sql_write(move |x| {
            let (c, outbox) = (c.clone(), outbox.clone());
            Box::pin(async move { sql::approvals::change(x, &c, outbox.as_deref()).await })
        })
    }
}
