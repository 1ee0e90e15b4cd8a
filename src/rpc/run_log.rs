//! The daemon's default-level log of runs: one line when a run starts (the bridge stores its
//! `request` event) and one when it ends (its terminal `status` event), read from the
//! `runEvents.append` calls that the store committed (and the run metrics: runs by status and
//! their durations). Every other store call is a `debug`
//! line of its own (see `store.rs`).

use serde_json::Value;

use crate::store::{Namespace, StoreCall};

/// Called with the namespace and run id after a run's terminal event is committed. Must
/// not wait (telemetry's is a `try_send`): it runs on the store call's path.
pub type RunEndedHook = std::sync::Arc<dyn Fn(&Namespace, &str) + Send + Sync>;

/// Told of each committed append: its namespace, run id and stored event document.
pub type RunEventHook = std::sync::Arc<dyn Fn(&Namespace, &str, &str) + Send + Sync>;

/// A run's start or end, from the append that records it.
pub(super) enum Lifecycle {
    Started {
        run_id: String,
    },
    Ended {
        run_id: String,
        status: String,
    },
    /// The run's token usage (the bridge appends one `usage` event per run, before its end):
    /// counted in the metrics, never logged.
    Usage {
        tokens: Vec<(&'static str, u64)>,
    },
}

impl Lifecycle {
    /// The start or end an append records, if any. Payloads that cannot be either are not
    /// parsed (a cheap text check first: most appends are deltas, messages and tool calls).
    pub(super) fn of(call: &StoreCall) -> Option<Lifecycle> {
        let StoreCall::EventsAppend(event) = call else {
            return None;
        };
        let text = event.payload.as_ref();
        if !text.contains("\"request\"")
            && !text.contains("\"status\"")
            && !text.contains("\"usage\"")
        {
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
            "status" => {
                let status = message
                    .get("status")
                    .and_then(Value::as_str)
                    .and_then(crate::run::RunStatus::parse_event)?;
                status.is_terminal().then(|| Lifecycle::Ended {
                    run_id,
                    status: status.to_string(),
                })
            }
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

    /// The run id, if this is a run's end.
    pub(super) fn ended(&self) -> Option<&str> {
        match self {
            Lifecycle::Ended { run_id, .. } => Some(run_id),
            Lifecycle::Started { .. } | Lifecycle::Usage { .. } => None,
        }
    }

    /// Logs it and feeds the run metrics.
    pub(super) fn record(&self, ns: &Namespace, metrics: &crate::metrics::Metrics) {
        match self {
            Lifecycle::Started { run_id } => metrics.run_started(ns.as_str(), run_id),
            Lifecycle::Ended { run_id, status } => metrics.run_ended(ns.as_str(), run_id, status),
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
            Lifecycle::Ended { run_id, status } => {
                tracing::info!(target: "callbackd::runs", namespace = ns.as_str(), run_id, status, "run ended");
            }
            Lifecycle::Usage { .. } => {}
        }
    }
}
