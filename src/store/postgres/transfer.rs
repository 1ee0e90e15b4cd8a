//! [`Transfer`] on PostgreSQL, for `callbackd copy-store`.

use std::sync::Arc;

use super::{redact_url, PgOptions, PgStore};
use crate::store::transfer::{Key, Row, Table, Transfer, TransferError};
use crate::store::{sql, BoxFuture, StoreError};

/// One side of a copy: the store's own pool, on its schema.
pub struct PgTransfer {
    store: PgStore,
    url: String,
}

impl PgTransfer {
    /// Connects to the store `opts` names; a target is migrated first (as the daemon would).
    pub async fn open(opts: &PgOptions, target: bool) -> Result<Self, TransferError> {
        let store = PgStore::connect(opts, target)
            .await
            .map_err(|e| TransferError::Store(format!("{e:#}")))?;
        let url = redact_url(opts.url.expose());
        Ok(PgTransfer { store, url })
    }

    fn fail(&self, e: &StoreError) -> TransferError {
        TransferError::Store(format!("PostgreSQL {}: {e}", self.url))
    }
}

impl Transfer for PgTransfer {
    fn describe(&self) -> String {
        format!("PostgreSQL {}", self.url)
    }

    fn count(&mut self, table: Table) -> BoxFuture<'_, Result<u64, TransferError>> {
        Box::pin(async move {
            self.store
                .sql_read(move |x| Box::pin(sql::transfer::count(x, table)))
                .await
                .map_err(|e| self.fail(&e))
        })
    }

    fn read<'a>(
        &'a mut self,
        table: Table,
        after: Option<&'a Key>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<Row>, TransferError>> {
        let after = after.cloned();
        Box::pin(async move {
            self.store
                .sql_read(move |x| {
                    let after = after.clone();
                    Box::pin(
                        async move { sql::transfer::read(x, table, after.as_ref(), limit).await },
                    )
                })
                .await
                .map_err(|e| self.fail(&e))?
        })
    }

    fn write<'a>(&'a mut self, rows: &'a [Row]) -> BoxFuture<'a, Result<(), TransferError>> {
        let rows = Arc::new(rows.to_vec());
        Box::pin(async move {
            self.store
                .sql_write(move |x| {
                    let rows = rows.clone();
                    Box::pin(async move { sql::transfer::write(x, &rows).await })
                })
                .await
                .map_err(|e| self.fail(&e))
        })
    }

    /// Each run's seq counter: the next append continues after the copied events.
    fn finish(&mut self) -> BoxFuture<'_, Result<(), TransferError>> {
        Box::pin(async move {
            self.store
                .sql_write(|x| {
                    Box::pin(async move {
                        x.execute(
                            "INSERT INTO run_seqs (ns, run_id, last_seq) \
                             SELECT ns, run_id, max(seq) FROM run_events GROUP BY ns, run_id",
                            &[],
                        )
                        .await?;
                        x.execute(
                            "SELECT setval(pg_get_serial_sequence('tool_calls', 'id'), \
                                           (SELECT max(id) FROM tool_calls)) \
                             WHERE EXISTS (SELECT 1 FROM tool_calls)",
                            &[],
                        )
                        .await?;
                        Ok(())
                    })
                })
                .await
                .map_err(|e| self.fail(&e))
        })
    }
}
