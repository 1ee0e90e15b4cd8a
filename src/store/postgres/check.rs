//! `callbackd check` on PostgreSQL: every checkpoint blob against the checksum taken when
//! it was written. (PostgreSQL checks its own pages; `amcheck` is the tool for indexes.)

use futures_util::TryStreamExt;

use super::PgStore;
use crate::store::check::CheckReport;
use crate::store::{sql, StoreError};

impl PgStore {
    /// Reads every blob once, streaming (never the whole table in memory).
    pub async fn check(&self) -> Result<CheckReport, StoreError> {
        let inner = self.inner.clone();
        let run = async move {
            let client = inner.pool.get().await.map_err(super::error::Fail::from)?;
            let mut report = CheckReport {
                schema_version: super::migrate::version(&client, &inner.schema)
                    .await
                    .map_err(super::error::Fail::from)?,
                ..Default::default()
            };
            if report.schema_version == 0 {
                // Nothing was ever migrated here: no tables, nothing to check.
                return Ok(report);
            }
            let rows = client
                .query_raw(sql::checkpoints::EVERY_BLOB, std::iter::empty::<i32>())
                .await
                .map_err(super::error::Fail::from)?;
            futures_util::pin_mut!(rows);
            while let Some(row) = rows.try_next().await.map_err(super::error::Fail::from)? {
                report.blob(row.get(3), row.get(4), || {
                    Ok::<_, super::error::Fail>((row.get(0), row.get(1), row.get(2)))
                })?;
            }
            Ok::<_, super::error::Fail>(report)
        };
        self.inner
            .handle
            .spawn(run)
            .await
            .map_err(|e| StoreError::Internal(format!("check task failed: {e}")))?
            .map_err(super::error::Fail::into_store_error)
    }
}
