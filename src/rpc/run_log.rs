//! The daemon's default-level log of runs: one line when a run starts (the bridge stores its
//! `request` event), read from the `runEvents.append` calls that the store committed, and
//! the run metrics it feeds (starts, token usage). A run's end is not read here: the store
//! announces it (`StoreNotice::RunEnded`), and `app::run_ends` logs and counts it. Every
//! other store call is a `debug` line of its own (see `store.rs`).

use serde_json::Value;

use crate::store::{Namespace, StoreCall};

/// Told of each committed append: its namespace, run id and stored event document. Must not
/// wait (telemetry's keeps a few events): it runs on the store call's path.
pub type RunEventHook = std::sync::Arc<dyn Fn(&Namespace, &str, &str) + Send + Sync>;

/// A run's start or its usage, from the append that records it.
pub(super) enum Lifecycle {
    Started {
        run_id: String,
    },
    /// The run's token usage (the bridge appends one `usage` event per run, before its end):
    /// counted in the metrics, never logged.
    Usage {
        tokens: Vec<(&'static str, u64)>,
    },
}

impl Lifecycle {
    /// The start or usage an append records, if any. Payloads that cannot be either are not
    /// parsed (a cheap text check first: most appends are deltas, messages and tool calls).
    pub(super) fn of(call: &StoreCall) -> Option<Lifecycle> {
        let StoreCall::EventsAppend(event) = call else {
            return None;
        };
        let text = event.payload.as_ref();
        if !text.contains("\"request\"") && !text.contains("\"usage\"") {
            return None;
        }
        let payload: Value = serde_json::from_str(text).ok()?;
        if payload.get("type").and_then(Value::as_str) != Some("sdk_message") {
            return None;
        }
        let message = payload.get("message")?;
        let run_id = event.run_id.clone();
        match message.get("type").and_then(Value::as_str)? {
            "request" => Some(Lifecycle::Started { run_id }),
            "usage" => {
                let usage = message.get("usage")?;
                let tokens = [
                    ("input", "inputTokens"),
                    ("output", "outputTokens"),
                    ("cache_read", "cacheReadTokens"),
                    ("cache_write", "cacheWriteTokens"),
                ]
                .into_iter()
                .filter_map(|(kind, key)| Some((kind, usage.get(key)?.as_u64()?)))
                .collect();
                Some(Lifecycle::Usage { tokens })
            }
            _ => None,
        }
    }

    /// Logs it and feeds the run metrics.
    pub(super) fn record(&self, ns: &Namespace, metrics: &crate::metrics::Metrics) {
        match self {
            Lifecycle::Started { run_id } => metrics.run_started(ns.as_str(), run_id),
            Lifecycle::Usage { tokens } => {
                for (kind, n) in tokens {
                    metrics.tokens(ns.as_str(), kind, *n);
                }
            }
        }
        match self {
            Lifecycle::Started { run_id } => {
                tracing::info!(target: "callbackd::runs", namespace = ns.as_str(), run_id, "run started");
            }
            Lifecycle::Usage { .. } => {}
        }
    }
}
