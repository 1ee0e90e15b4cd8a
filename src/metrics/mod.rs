//! [`Metrics`]: what `GET /metrics` reports, in the Prometheus text format, through the
//! Prometheus project's own `prometheus-client` crate.
//!
//! Series (all prefixed `callbackd_`):
//! - `store_call_duration_seconds{namespace, call, outcome}`: a histogram per namespace, store
//!   call (`runEvents.append`, ...) and outcome (`ok`, a Connect code, `cancelled`); its `_count`
//!   is the number of calls.
//! - `tool_call_duration_seconds{namespace, tool, outcome}`: the same per custom tool and tool outcome
//!   (`ok`, `failed`, `timeout`, ...). A tool this daemon does not serve is counted as
//!   `tool="(unknown)"`, so a client cannot mint series with made-up names. A request
//!   refused before its call or tool was known counts as `"(undecoded)"`.
//! - `quota_refusals_total{namespace, quota}`: calls refused by a namespace's quota.
//! - `namespace_agents{namespace}`, `namespace_stored_bytes{namespace}`: what each namespace
//!   holds, as last read from the store ([`Metrics::set_usage`], every 30 s).
//!   `namespace` is always a configured name (or `default`), never one a client sent.
//! - `events_appended_total`: run events committed (an idempotent repeat is not a new event).
//! - `database_size_bytes`, `wal_size_bytes`: the store's files, read at scrape time.
//! - `streams_open`, `stream_followers`, `retention_removed_total`: fed by the run API
//!   through [`Metrics::stream_opened`], [`Metrics::stream_closed`],
//!   [`Metrics::follower_started`], [`Metrics::follower_stopped`] and
//!   [`Metrics::retention_removed`].
//! - `telemetry_spans_exported_total`, `telemetry_spans_dropped_total`: OpenTelemetry spans
//!   of runs sent to the collector, and those dropped instead (queue full, collector down
//!   or refusing them); fed by `telemetry::traces` ([`Metrics::spans_exported`],
//!   [`Metrics::spans_dropped`]).
//!
//! - `runs_total{namespace, status}`, `run_duration_seconds{namespace}`,
//!   `tool_calls_total{namespace, tool, outcome}`, `tokens_total{namespace, kind}`: see
//!   [`runs`]; fed through [`Metrics::run_started`], [`Metrics::run_ended`],
//!   [`Metrics::tokens`] and [`Metrics::tool_call`].
//!
//! Recording is a hash lookup under a read lock and a short mutex: well under a microsecond,
//! against an append's ~100 µs (see BENCHMARKS.md for the measured cost).

pub mod endpoint;
mod held;
mod runs;
pub mod token;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use tokio::sync::broadcast;

use crate::auth::TokenSet;
use crate::store::StoreNotice;

/// Label of a tool call whose tool this daemon does not serve.
pub const UNKNOWN_TOOL: &str = "(unknown)";
/// `call` / `tool` label of a request refused before its call was known (bad body).
pub const UNDECODED: &str = "(undecoded)";

/// Store-call latency buckets, seconds: 50 µs (a cached read) to 5 s (a busy disk).
const STORE_BUCKETS: [f64; 14] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 5.0,
];
/// Tool-call latency buckets, seconds: 1 ms (a built-in) to 2 minutes (a slow command).
const TOOL_BUCKETS: [f64; 12] = [
    0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 15.0, 60.0, 120.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreLabels {
    namespace: String,
    call: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    namespace: String,
    tool: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QuotaLabels {
    namespace: String,
    quota: &'static str,
}

type Usage = Arc<Mutex<Vec<crate::store::records::NamespaceUsage>>>;

/// The sizes of the store's files, for the size gauges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreSizes {
    pub database_bytes: u64,
    pub wal_bytes: u64,
}

type SizesFn = Box<dyn Fn() -> StoreSizes + Send + Sync>;

/// The daemon's metrics. Cheap to clone (one `Arc`); every clone records into the same
/// registry.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    store_calls: Family<StoreLabels, Histogram, fn() -> Histogram>,
    tool_calls: Family<ToolLabels, Histogram, fn() -> Histogram>,
    quota_refusals: Family<QuotaLabels, Counter>,
    usage: Usage,
    events_appended: Counter,
    /// Notices of committed appends, drained into `events_appended` at each scrape: the
    /// append path pays one broadcast send (which it makes anyway for live followers), not
    /// a task wake-up. A receiver that fell behind reports how many it missed, so the count
    /// stays exact.
    appended: Mutex<Option<broadcast::Receiver<StoreNotice>>>,
    streams_open: Gauge,
    /// Refusals counted by `auth` (below this module), and how many of them are in
    /// `auth_refused` already.
    auth_refused: Counter,
    auth_seen: std::sync::atomic::AtomicU64,
    followers: Gauge,
    retention_removed: Counter,
    spans_exported: Counter,
    spans_dropped: Counter,
    webhook_deliveries: Family<Vec<(&'static str, &'static str)>, Counter>,
    webhooks_pending: Gauge,
    runs: runs::RunMetrics,
    held: held::HeldSource,
    /// The bearer token `/metrics` requires; `None`: open (see `metrics::token`).
    token: Option<TokenSet>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    /// Metrics with no store attached (no size gauges, no append count) and no token.
    fn default() -> Self {
        Metrics::build(None, None, None)
    }
}

impl Metrics {
    /// The daemon's metrics: append notices from `appended` (the store's
    /// [`subscribe`](crate::Store::subscribe)), file sizes from `sizes` at each scrape, and
    /// `token` required on `/metrics` when set.
    pub fn new(
        appended: broadcast::Receiver<StoreNotice>,
        sizes: impl Fn() -> StoreSizes + Send + Sync + 'static,
        token: Option<TokenSet>,
    ) -> Metrics {
        Metrics::build(Some(appended), Some(Box::new(sizes)), token)
    }

    fn build(
        appended: Option<broadcast::Receiver<StoreNotice>>,
        sizes: Option<SizesFn>,
        token: Option<TokenSet>,
    ) -> Metrics {
        let mut registry = Registry::with_prefix("callbackd");
        let store_calls: Family<StoreLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| Histogram::new(STORE_BUCKETS));
        registry.register_with_unit(
            "store_call_duration",
            "Store callback calls by substore.method and outcome, and how long they took",
            Unit::Seconds,
            store_calls.clone(),
        );
        let tool_calls: Family<ToolLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| Histogram::new(TOOL_BUCKETS));
        registry.register_with_unit(
            "tool_call_duration",
            "Custom tool calls by tool and outcome, and how long they took",
            Unit::Seconds,
            tool_calls.clone(),
        );
        let quota_refusals = Family::<QuotaLabels, Counter>::default();
        registry.register(
            "quota_refusals",
            "Calls refused by a namespace's quota, by namespace and quota",
            quota_refusals.clone(),
        );
        let usage = Usage::default();
        registry.register_collector(Box::new(UsageCollector(usage.clone())));
        let events_appended = Counter::default();
        registry.register(
            "events_appended",
            "Run events committed by runEvents.append (idempotent repeats excluded)",
            events_appended.clone(),
        );
        let auth_refused = Counter::default();
        registry.register(
            "auth_refused",
            "Requests refused for a missing or wrong bearer token (store, tools, metrics)",
            auth_refused.clone(),
        );
        let streams_open = Gauge::default();
        registry.register(
            "streams_open",
            "Run event streams (SSE) open now",
            streams_open.clone(),
        );
        let followers = Gauge::default();
        registry.register(
            "stream_followers",
            "Open streams that have caught up and wait for new events of a live run",
            followers.clone(),
        );
        let retention_removed = Counter::default();
        registry.register(
            "retention_removed",
            "Run events removed by retention",
            retention_removed.clone(),
        );
        let spans_exported = Counter::default();
        registry.register(
            "telemetry_spans_exported",
            "OpenTelemetry spans of runs the collector accepted",
            spans_exported.clone(),
        );
        let spans_dropped = Counter::default();
        registry.register(
            "telemetry_spans_dropped",
            "OpenTelemetry spans of runs dropped: export queue full, collector unreachable or refusing",
            spans_dropped.clone(),
        );
        let webhook_deliveries = Family::<Vec<(&'static str, &'static str)>, Counter>::default();
        registry.register(
            "webhook_deliveries",
            "Webhook attempts by outcome: delivered, retry (failed, tried again later), failed \
             (the last attempt failed: given up)",
            webhook_deliveries.clone(),
        );
        let webhooks_pending = Gauge::default();
        registry.register(
            "webhooks_pending",
            "Webhook deliveries waiting for an attempt (every namespace; 0 without [[webhooks]])",
            webhooks_pending.clone(),
        );
        let runs = runs::RunMetrics::register(&mut registry);
        if let Some(sizes) = sizes {
            registry.register_collector(Box::new(SizesCollector(sizes)));
        }
        let held = held::HeldSource::default();
        registry.register_collector(Box::new(held::HeldCollector::new(held.clone())));
        Metrics {
            inner: Arc::new(Inner {
                registry,
                store_calls,
                tool_calls,
                quota_refusals,
                usage,
                events_appended,
                appended: Mutex::new(appended),
                streams_open,
                auth_refused,
                auth_seen: Default::default(),
                followers,
                retention_removed,
                spans_exported,
                spans_dropped,
                webhook_deliveries,
                webhooks_pending,
                runs,
                held,
                token,
            }),
        }
    }

    /// Records one store call of namespace `ns` (`call` is `substore.method`).
    pub fn store_call(
        &self,
        ns: &str,
        call: &'static str,
        outcome: &'static str,
        latency: Duration,
    ) {
        self.inner
            .store_calls
            .get_or_create(&StoreLabels {
                namespace: ns.to_string(),
                call,
                outcome,
            })
            .observe(latency.as_secs_f64());
    }

    /// A call of namespace `ns` was refused by its `quota`.
    pub fn quota_refused(&self, ns: &str, quota: &'static str) {
        self.inner
            .quota_refusals
            .get_or_create(&QuotaLabels {
                namespace: ns.to_string(),
                quota,
            })
            .inc();
    }

    /// A webhook attempt ended: `delivered`, `retry` or `failed` (given up).
    pub fn webhook_attempt(&self, outcome: &'static str) {
        self.inner
            .webhook_deliveries
            .get_or_create(&vec![("outcome", outcome)])
            .inc();
    }

    /// The webhook deliveries waiting for an attempt, as last read from the outbox.
    pub fn webhooks_pending(&self, n: i64) {
        self.inner.webhooks_pending.set(n);
    }

    /// Reports `read()` (the calls held for a person, per namespace) as
    /// `approvals_pending{namespace}` at each scrape. Set once, by the composition root.
    pub fn count_held(&self, read: impl Fn() -> Vec<(String, u64)> + Send + Sync + 'static) {
        let _ = self.inner.held.set(Box::new(read));
    }

    /// What each namespace holds, for the usage gauges (read from the store periodically).
    pub fn set_usage(&self, usage: Vec<crate::store::records::NamespaceUsage>) {
        *self.inner.usage.lock().unwrap_or_else(|p| p.into_inner()) = usage;
    }

    /// Records one custom tool call. `tool` must be a tool the registry serves, or
    /// [`UNKNOWN_TOOL`].
    pub fn tool_call(&self, ns: &str, tool: &str, outcome: &'static str, latency: Duration) {
        let labels = ToolLabels {
            namespace: ns.to_string(),
            tool: tool.to_string(),
            outcome,
        };
        self.inner
            .tool_calls
            .get_or_create(&labels)
            .observe(latency.as_secs_f64());
        self.inner.runs.tool_call(ns, tool, outcome);
    }

    /// The bridge recorded the start of run `run_id` (its `request` event).
    pub fn run_started(&self, ns: &str, run_id: &str) {
        self.inner
            .runs
            .started(ns, run_id, std::time::Instant::now());
    }

    /// The bridge recorded `n` tokens of `kind` (`input`, `output`, `cache_read`,
    /// `cache_write`) in a run's `usage` event.
    pub fn tokens(&self, ns: &str, kind: &'static str, n: u64) {
        self.inner.runs.tokens(ns, kind, n);
    }

    /// The bridge recorded the end of run `run_id` with `status` (`finished`, `error`, ...).
    pub fn run_ended(&self, ns: &str, run_id: &str, status: &str) {
        self.inner
            .runs
            .ended(ns, run_id, status, std::time::Instant::now());
    }

    /// A run event stream (SSE) was opened. Pair with [`stream_closed`](Self::stream_closed),
    /// or hold a [`StreamGuard`] from [`stream_guard`](Self::stream_guard).
    pub fn stream_opened(&self) {
        self.inner.streams_open.inc();
    }

    /// A run event stream was closed (finished, or its client went away).
    pub fn stream_closed(&self) {
        self.inner.streams_open.dec();
    }

    /// [`stream_opened`](Self::stream_opened) now, [`stream_closed`](Self::stream_closed)
    /// when the guard is dropped (also when the stream's future is dropped mid-way).
    pub fn stream_guard(&self) -> StreamGuard {
        self.stream_opened();
        StreamGuard(self.clone())
    }

    /// An open stream has sent every durable event and now waits for live appends.
    pub fn follower_started(&self) {
        self.inner.followers.inc();
    }

    /// A waiting stream stopped waiting (its run ended, or its client went away).
    pub fn follower_stopped(&self) {
        self.inner.followers.dec();
    }

    /// Retention removed `n` run events.
    pub fn retention_removed(&self, n: u64) {
        self.inner.retention_removed.inc_by(n);
    }

    /// The collector accepted `n` spans.
    pub fn spans_exported(&self, n: u64) {
        self.inner.spans_exported.inc_by(n);
    }

    /// `n` spans were dropped instead of exported.
    pub fn spans_dropped(&self, n: u64) {
        self.inner.spans_dropped.inc_by(n);
    }

    /// The bearer token `/metrics` requires, if any.
    pub fn token(&self) -> Option<&TokenSet> {
        self.inner.token.as_ref()
    }

    /// Everything, in the Prometheus text format (version 0.0.4).
    pub fn encode(&self) -> String {
        self.drain_appended();
        let total = crate::auth::refused_total();
        let seen = self
            .inner
            .auth_seen
            .swap(total, std::sync::atomic::Ordering::Relaxed);
        self.inner.auth_refused.inc_by(total.saturating_sub(seen));
        let mut out = String::with_capacity(8 * 1024);
        prometheus_client::encoding::prometheus_text::encode(&mut out, &self.inner.registry)
            .expect("writing to a String cannot fail");
        out
    }

    /// Counts the append notices received since the last scrape.
    fn drain_appended(&self) {
        let mut rx = self
            .inner
            .appended
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let Some(rx) = rx.as_mut() else { return };
        loop {
            match rx.try_recv() {
                // This daemon's appends; on PostgreSQL other daemons count their own.
                Ok(StoreNotice::Appended(_)) => {
                    self.inner.events_appended.inc();
                }
                Ok(_) => {}
                Err(broadcast::error::TryRecvError::Lagged(missed)) => {
                    self.inner.events_appended.inc_by(missed);
                }
                Err(_) => break,
            }
        }
    }
}

/// Counts an open stream until dropped ([`Metrics::stream_guard`]).
#[must_use = "the stream counts as open only while the guard lives"]
pub struct StreamGuard(Metrics);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.0.stream_closed();
    }
}

/// The namespace usage gauges, from the last [`Metrics::set_usage`].
struct UsageCollector(Usage);

impl std::fmt::Debug for UsageCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UsageCollector")
    }
}

impl Collector for UsageCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let usage = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if usage.is_empty() {
            return Ok(());
        }
        for (name, help, unit, get) in [
            (
                "namespace_agents",
                "Agents stored per namespace (as last read from the store)",
                None,
                (|u: &crate::store::records::NamespaceUsage| u.agents) as fn(&_) -> u64,
            ),
            (
                "namespace_stored",
                "Bytes of documents, events, checkpoints and notes per namespace",
                Some(Unit::Bytes),
                |u| u.stored_bytes,
            ),
        ] {
            let family = Family::<Vec<(String, String)>, Gauge>::default();
            for u in &usage {
                family
                    .get_or_create(&vec![("namespace".to_string(), u.namespace.clone())])
                    .set(i64::try_from(get(u)).unwrap_or(i64::MAX));
            }
            let metric =
                encoder.encode_descriptor(name, help, unit.as_ref(), family.metric_type())?;
            family.encode(metric)?;
        }
        Ok(())
    }
}

/// The size gauges, read when scraped.
struct SizesCollector(SizesFn);

impl std::fmt::Debug for SizesCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SizesCollector")
    }
}

impl Collector for SizesCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let sizes = (self.0)();
        for (name, help, value) in [
            (
                "database_size",
                "Size of the database file",
                sizes.database_bytes,
            ),
            (
                "wal_size",
                "Size of the write-ahead log (0 when there is none)",
                sizes.wal_bytes,
            ),
        ] {
            let gauge = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
            let metric =
                encoder.encode_descriptor(name, help, Some(&Unit::Bytes), gauge.metric_type())?;
            gauge.encode(metric)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
