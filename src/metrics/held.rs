//! `approvals_pending{namespace}`: the tool calls (and `ask_user` questions) this daemon holds
//! waiting for a person, read from the approvals' own table of waiters when scraped, so the
//! gauge cannot drift from what is really held. Per daemon: on PostgreSQL each daemon reports
//! the calls it holds, and their sum is the whole. A namespace once seen stays at 0 rather
//! than vanishing, so `== 0` and `absent()` alerts both read right.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, OnceLock};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

/// Reads `(namespace, held calls)` pairs.
pub(super) type HeldFn = Box<dyn Fn() -> Vec<(String, u64)> + Send + Sync>;

/// Where [`Metrics::count_held`](super::Metrics::count_held) puts the reader (the approvals
/// are built after the metrics' registry).
pub(super) type HeldSource = Arc<OnceLock<HeldFn>>;

pub(super) struct HeldCollector {
    pub(super) source: HeldSource,
    seen: Mutex<BTreeSet<String>>,
}

impl HeldCollector {
    pub(super) fn new(source: HeldSource) -> Self {
        HeldCollector {
            source,
            seen: Mutex::default(),
        }
    }
}

impl std::fmt::Debug for HeldCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HeldCollector")
    }
}

impl Collector for HeldCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(read) = self.source.get() else {
            return Ok(());
        };
        let now = read();
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.extend(now.iter().map(|(ns, _)| ns.clone()));
        seen.insert(crate::store::Namespace::default().as_str().to_string());
        let family = Family::<Vec<(String, String)>, Gauge>::default();
        for ns in seen.iter() {
            let n = now.iter().find(|(n, _)| n == ns).map_or(0, |(_, c)| *c);
            family
                .get_or_create(&vec![("namespace".to_string(), ns.clone())])
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        let metric = encoder.encode_descriptor(
            "approvals_pending",
            "Tool calls and ask_user questions this daemon holds waiting for a person",
            None,
            family.metric_type(),
        )?;
        family.encode(metric)
    }
}
