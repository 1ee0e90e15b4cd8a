//! Retention (run-api.md §5): the events of terminal runs older than
//! `retention.events_max_age` are removed in small transactions (`retention.batch_runs`
//! runs each, through the store's writer, so appends wait at most one batch), and each run
//! remembers up to which seq its events are gone (a replay that needs them is `410`).

use std::sync::Arc;
use std::time::Duration;

use crate::store::records::PruneReport;
use crate::store::{RunRecords, StoreError};

/// Removes the events of every terminal run that ended more than `older_than` ago.
pub async fn prune(
    records: &dyn RunRecords,
    older_than: Duration,
    batch: usize,
) -> Result<PruneReport, StoreError> {
    let before = crate::clock::now_ms() - older_than.as_millis() as i64;
    let mut total = PruneReport::default();
    loop {
        let r = records.prune_batch(before, batch).await?;
        total.runs += r.runs;
        total.events += r.events;
        if r.runs == 0 {
            return Ok(total);
        }
        // Let waiting appends in between batches.
        tokio::task::yield_now().await;
    }
}

/// Prunes every `interval` while the daemon runs.
pub fn spawn_periodic(
    records: Arc<dyn RunRecords>,
    older_than: Duration,
    interval: Duration,
    batch: usize,
    metrics: crate::metrics::Metrics,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        loop {
            tick.tick().await;
            match prune(records.as_ref(), older_than, batch).await {
                Ok(r) if r.runs > 0 => {
                    metrics.retention_removed(r.events);
                    tracing::info!(
                        runs = r.runs,
                        events = r.events,
                        "retention removed run events"
                    )
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "retention failed; retrying at the next interval")
                }
            }
        }
    })
}
