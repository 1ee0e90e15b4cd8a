//! What each namespace holds, against its quotas: `callbackd namespaces` and the usage
//! gauges of `/metrics`.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::{Quotas, Table};
use crate::metrics::Metrics;
use crate::store::records::NamespaceUsage;
use crate::store::{RunRecords, StoreError};

/// How often the daemon reads the usage for `/metrics`: a scan of every row, so not often.
pub const METRICS_REFRESH: Duration = Duration::from_secs(300);

/// One namespace's line of `callbackd namespaces`.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    #[serde(flatten)]
    pub usage: NamespaceUsage,
    /// Whether the configuration names it (data of a removed namespace stays in the store).
    pub configured: bool,
    pub quotas: QuotaView,
}

/// The quotas, as printed (`null`: unlimited).
#[derive(Debug, Clone, Default, Serialize)]
pub struct QuotaView {
    pub max_agents: Option<u64>,
    pub max_stored_bytes: Option<u64>,
    pub max_events_per_run: Option<u64>,
    pub max_appends_per_second: Option<u64>,
}

impl From<Quotas> for QuotaView {
    fn from(q: Quotas) -> Self {
        QuotaView {
            max_agents: q.max_agents,
            max_stored_bytes: q.max_stored_bytes,
            max_events_per_run: q.max_events_per_run,
            max_appends_per_second: q.max_appends_per_second,
        }
    }
}

/// Every configured namespace, and every namespace the store holds data of, by name.
pub async fn rows(records: &dyn RunRecords, table: &Table) -> Result<Vec<Row>, StoreError> {
    let mut usage = records.usage(None).await?;
    for ns in table.names() {
        if !usage.iter().any(|u| u.namespace == ns.as_str()) {
            usage.push(NamespaceUsage {
                namespace: ns.as_str().to_string(),
                ..Default::default()
            });
        }
    }
    usage.sort_by(|a, b| a.namespace.cmp(&b.namespace));
    Ok(usage
        .into_iter()
        .map(|u| {
            let settings = table
                .settings
                .get(&crate::store::Namespace::new(&u.namespace));
            Row {
                configured: settings.is_some(),
                quotas: settings.map(|s| s.quotas.into()).unwrap_or_default(),
                usage: u,
            }
        })
        .collect())
}

/// The rows as a table for people.
pub fn render(rows: &[Row]) -> String {
    let of = |used: u64, max: Option<u64>| match max {
        Some(max) => format!("{used}/{max}"),
        None => used.to_string(),
    };
    let mut lines = vec![[
        "NAMESPACE".to_string(),
        "AGENTS".into(),
        "RUNS".into(),
        "EVENTS".into(),
        "CHECKPOINTS".into(),
        "NOTES".into(),
        "STORED_BYTES".into(),
        "RATE/S".into(),
    ]];
    for r in rows {
        let u = &r.usage;
        let name = if r.configured {
            u.namespace.clone()
        } else {
            format!("{} (not configured)", u.namespace)
        };
        lines.push([
            name,
            of(u.agents, r.quotas.max_agents),
            u.runs.to_string(),
            match r.quotas.max_events_per_run {
                Some(max) => format!("{} (max {max}/run)", u.events),
                None => u.events.to_string(),
            },
            u.checkpoints.to_string(),
            u.memory_notes.to_string(),
            of(u.stored_bytes, r.quotas.max_stored_bytes),
            r.quotas
                .max_appends_per_second
                .map_or("-".into(), |r| r.to_string()),
        ]);
    }
    let widths: Vec<usize> = (0..8)
        .map(|i| lines.iter().map(|l| l[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for l in &lines {
        let cells: Vec<String> = l
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// Reads the usage into `metrics` now and every [`METRICS_REFRESH`], until aborted.
pub async fn feed_metrics(records: Arc<dyn RunRecords>, metrics: Metrics) {
    loop {
        match records.usage(None).await {
            Ok(usage) => metrics.set_usage(usage),
            Err(e) => tracing::debug!(error = %e, "cannot read namespace usage for /metrics"),
        }
        tokio::time::sleep(METRICS_REFRESH).await;
    }
}
