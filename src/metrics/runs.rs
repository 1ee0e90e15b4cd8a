//! Run-level series, fed by the store service as the bridge records each run's start and end
//! (`rpc::run_log`), and by every tool call:
//! - `runs_total{namespace, status}`: runs that ended (`finished`, `cancelled`, `expired`,
//!   `error`);
//! - `run_duration_seconds{namespace}`: from the run's start to its end, for runs whose start
//!   this daemon saw (a run started before a restart has a count in `runs_total` only);
//! - `tool_calls_total{namespace, tool, outcome}`: tool calls by outcome;
//! - `tokens_total{namespace, kind}`: tokens of the runs' `usage` events (`input`, `output`,
//!   `cache_read`, `cache_write`).
//!
//! Why a separate counter for tool calls when `tool_call_duration_seconds_count` holds the
//! same number: dashboards and alerts ask "how many failed" far more often than "how slow",
//! and a counter is what they expect to `rate()`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

/// Run duration buckets, seconds: 1 s (a one-line answer) to 1 h (a long agent task).
const RUN_BUCKETS: [f64; 10] = [
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, 1800.0, 3600.0,
];

/// At most this many runs are remembered as started; beyond it the oldest start is
/// forgotten (a run whose end never comes, e.g. its bridge died, must not grow memory).
const MAX_STARTED: usize = 10_000;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RunLabels {
    namespace: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NsLabels {
    namespace: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolCountLabels {
    namespace: String,
    tool: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    namespace: String,
    kind: &'static str,
}

pub(super) struct RunMetrics {
    runs: Family<RunLabels, Counter>,
    durations: Family<NsLabels, Histogram, fn() -> Histogram>,
    tool_calls: Family<ToolCountLabels, Counter>,
    tokens: Family<TokenLabels, Counter>,
    /// (namespace, run id) -> when its start was recorded.
    started: Mutex<HashMap<(String, String), Instant>>,
}

impl RunMetrics {
    pub(super) fn register(registry: &mut Registry) -> RunMetrics {
        let runs = Family::<RunLabels, Counter>::default();
        registry.register(
            "runs",
            "Runs that ended, by namespace and terminal status",
            runs.clone(),
        );
        let durations: Family<NsLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| Histogram::new(RUN_BUCKETS));
        registry.register_with_unit(
            "run_duration",
            "How long runs took from their start to their end",
            Unit::Seconds,
            durations.clone(),
        );
        let tool_calls = Family::<ToolCountLabels, Counter>::default();
        registry.register(
            "tool_calls",
            "Tool calls by namespace, tool and outcome",
            tool_calls.clone(),
        );
        let tokens = Family::<TokenLabels, Counter>::default();
        registry.register(
            "tokens",
            "Tokens the runs used, by namespace and kind (input, output, cache_read, cache_write)",
            tokens.clone(),
        );
        RunMetrics {
            runs,
            durations,
            tool_calls,
            tokens,
            started: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn started(&self, ns: &str, run_id: &str, now: Instant) {
        let mut started = self.started.lock().unwrap_or_else(|p| p.into_inner());
        if started.len() >= MAX_STARTED {
            if let Some(oldest) = started
                .iter()
                .min_by_key(|(_, t)| **t)
                .map(|(k, _)| k.clone())
            {
                started.remove(&oldest);
            }
        }
        started.insert((ns.to_string(), run_id.to_string()), now);
    }

    pub(super) fn ended(&self, ns: &str, run_id: &str, status: &str, now: Instant) {
        let start = self
            .started
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(ns.to_string(), run_id.to_string()));
        self.runs
            .get_or_create(&RunLabels {
                namespace: ns.to_string(),
                status: status.to_string(),
            })
            .inc();
        if let Some(start) = start {
            self.durations
                .get_or_create(&NsLabels {
                    namespace: ns.to_string(),
                })
                .observe(now.saturating_duration_since(start).as_secs_f64());
        }
    }

    pub(super) fn tool_call(&self, ns: &str, tool: &str, outcome: &'static str) {
        self.tool_calls
            .get_or_create(&ToolCountLabels {
                namespace: ns.to_string(),
                tool: tool.to_string(),
                outcome,
            })
            .inc();
    }

    pub(super) fn tokens(&self, ns: &str, kind: &'static str, n: u64) {
        self.tokens
            .get_or_create(&TokenLabels {
                namespace: ns.to_string(),
                kind,
            })
            .inc_by(n);
    }
}
