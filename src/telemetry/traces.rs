//! [`Traces`]: runs whose terminal event was stored -> spans -> OTLP, off the calls' path.
//!
//! Two tasks and two bounded queues:
//! - `run_ended` (called by the store RPC after it committed a terminal event) puts the run
//!   on a queue of [`RUN_QUEUE`] runs with `try_send`: a store call never waits for
//!   telemetry. A full queue drops the run (counted as one dropped span: its agent span).
//! - `run_event` (called by the store RPC with each committed append) keeps the events a
//!   trace is made of (`on_append`), so that the collector task builds each run's trace
//!   from them and a few small reads (`collect`: the run document, tool call records,
//!   approvals, input), reading the run's events back only when it did not see them all;
//!   it turns the trace into spans (`spans`) and puts them on the span queue
//!   (`[telemetry] queue_size`), again without waiting: a span that does not fit is dropped
//!   and counted.
//! - the exporter task sends batches of up to [`BATCH`] spans, at least every
//!   [`FLUSH_EVERY`], through `opentelemetry-otlp`'s HTTP/protobuf exporter, each export
//!   bounded by `export_timeout_ms`. A failed export (collector down, refusing, too slow)
//!   drops its spans, counts them, and says so in the log at most once a minute.
//!
//! So a collector that is down costs the spans and one warning a minute, nothing else: no
//! retry buffer grows, no call waits.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{SpanData, SpanExporter as _};
use tokio::sync::{mpsc, oneshot};

use super::collect::{kept_trace, run_trace, Sources};
use super::on_append::Appended;
use super::spans::{sampled, spans, trace_id};
use crate::config::TraceExport;
use crate::metrics::Metrics;
use crate::store::Namespace;

/// Runs waiting to be read back and turned into spans.
pub const RUN_QUEUE: usize = 1024;
/// Spans per export request at most.
pub const BATCH: usize = 512;
/// A partial batch waits this long at most.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// One warning about failed exports per this period at most.
const WARN_EVERY: Duration = Duration::from_secs(60);

enum RunMsg {
    Ended(Namespace, String),
    Flush(oneshot::Sender<()>),
}

enum SpanMsg {
    Span(Box<SpanData>),
    Flush(oneshot::Sender<()>),
}

/// The daemon's trace export. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Traces {
    runs: mpsc::Sender<RunMsg>,
    metrics: Metrics,
    /// The trace events of open runs, kept as they are appended.
    appended: std::sync::Arc<Appended>,
    ratio: f64,
}

impl std::fmt::Debug for RunMsg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunMsg")
    }
}

impl Traces {
    /// Builds the exporter and starts the two tasks (on the current runtime).
    pub fn start(
        export: &TraceExport,
        sources: Sources,
        metrics: Metrics,
    ) -> anyhow::Result<Traces> {
        let headers: HashMap<String, String> = export
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.expose().to_string()))
            .collect();
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(super::http::HyperClient)
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(export.endpoint.clone())
            .with_timeout(Duration::from_millis(export.export_timeout_ms))
            .with_headers(headers)
            .build()
            .map_err(|e| anyhow::anyhow!("telemetry: cannot build the OTLP exporter: {e}"))?;
        exporter.set_resource(
            &opentelemetry_sdk::Resource::builder()
                .with_service_name(export.service_name.clone())
                .build(),
        );
        let (runs, run_rx) = mpsc::channel(RUN_QUEUE);
        let (span_tx, span_rx) = mpsc::channel(export.queue_size);
        let appended = std::sync::Arc::new(Appended::new(export.capture_content));
        tokio::spawn(collector(
            run_rx,
            span_tx,
            sources,
            appended.clone(),
            metrics.clone(),
            export.sampling_ratio,
            export.capture_content,
        ));
        tokio::spawn(exporter_task(
            span_rx,
            exporter,
            metrics.clone(),
            export.endpoint.clone(),
            Duration::from_millis(export.export_timeout_ms),
        ));
        tracing::info!(
            endpoint = %export.endpoint,
            service = %export.service_name,
            sampling_ratio = export.sampling_ratio,
            capture_content = export.capture_content,
            "exporting traces of runs over OTLP"
        );
        Ok(Traces {
            runs,
            metrics,
            appended,
            ratio: export.sampling_ratio,
        })
    }

    /// Event document `doc` of run `run_id` was committed (`runEvents.append`'s answer):
    /// kept if its run's trace is built of it. On the store call's task; never waits.
    pub fn run_event(&self, ns: &Namespace, run_id: &str, doc: &str) {
        if self.ratio < 1.0 && !sampled(trace_id(ns.as_str(), run_id), self.ratio) {
            return;
        }
        self.appended.appended(ns, run_id, doc);
    }

    /// Run `run_id` of `ns` has its terminal event stored: trace it. Never waits.
    pub fn run_ended(&self, ns: &Namespace, run_id: &str) {
        if self
            .runs
            .try_send(RunMsg::Ended(ns.clone(), run_id.to_string()))
            .is_err()
        {
            self.metrics.spans_dropped(1);
        }
    }

    /// Exports everything queued so far; `false` if that took longer than `within`.
    pub async fn flush(&self, within: Duration) -> bool {
        let (tx, rx) = oneshot::channel();
        let flushed = async {
            self.runs.send(RunMsg::Flush(tx)).await.ok()?;
            rx.await.ok()
        };
        matches!(tokio::time::timeout(within, flushed).await, Ok(Some(())))
    }
}

async fn collector(
    mut runs: mpsc::Receiver<RunMsg>,
    out: mpsc::Sender<SpanMsg>,
    sources: Sources,
    appended: std::sync::Arc<Appended>,
    metrics: Metrics,
    ratio: f64,
    capture_content: bool,
) {
    let mut warned: Option<Instant> = None;
    while let Some(msg) = runs.recv().await {
        let (ns, run_id) = match msg {
            RunMsg::Ended(ns, run_id) => (ns, run_id),
            RunMsg::Flush(done) => {
                let _ = out.send(SpanMsg::Flush(done)).await;
                continue;
            }
        };
        if !sampled(trace_id(ns.as_str(), &run_id), ratio) {
            continue;
        }
        let trace = match appended.take(&ns, &run_id) {
            Some(kept) => kept_trace(&sources, &ns, &run_id, &kept.events, kept.first_at_ms).await,
            None => run_trace(&sources, &ns, &run_id).await,
        };
        match trace {
            Ok(Some(trace)) => {
                for span in spans(&trace, capture_content) {
                    if out.try_send(SpanMsg::Span(Box::new(span))).is_err() {
                        metrics.spans_dropped(1);
                    }
                }
            }
            Ok(None) => {
                tracing::debug!(
                    namespace = ns.as_str(),
                    run_id,
                    "no terminal event: not traced"
                );
            }
            Err(error) => {
                metrics.spans_dropped(1);
                if warned.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
                    warned = Some(Instant::now());
                    tracing::warn!(namespace = ns.as_str(), run_id, %error, "cannot read a run back to trace it");
                }
            }
        }
    }
}

async fn exporter_task(
    mut spans: mpsc::Receiver<SpanMsg>,
    exporter: opentelemetry_otlp::SpanExporter,
    metrics: Metrics,
    endpoint: String,
    timeout: Duration,
) {
    let mut out = Out {
        exporter,
        metrics,
        endpoint,
        timeout,
        warned: None,
        failed_since_warning: 0,
    };
    let mut batch: Vec<SpanData> = Vec::new();
    let mut tick = tokio::time::interval(FLUSH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            msg = spans.recv() => match msg {
                Some(SpanMsg::Span(span)) => {
                    batch.push(*span);
                    if batch.len() >= BATCH {
                        out.export(&mut batch).await;
                    }
                }
                Some(SpanMsg::Flush(done)) => {
                    out.export(&mut batch).await;
                    let _ = done.send(());
                }
                None => {
                    out.export(&mut batch).await;
                    return;
                }
            },
            _ = tick.tick() => out.export(&mut batch).await,
        }
    }
}

struct Out {
    exporter: opentelemetry_otlp::SpanExporter,
    metrics: Metrics,
    endpoint: String,
    timeout: Duration,
    warned: Option<Instant>,
    failed_since_warning: u64,
}

impl Out {
    async fn export(&mut self, batch: &mut Vec<SpanData>) {
        if batch.is_empty() {
            return;
        }
        let n = batch.len() as u64;
        let sent = std::mem::take(batch);
        let error = match tokio::time::timeout(self.timeout, self.exporter.export(sent)).await {
            Ok(Ok(())) => {
                self.metrics.spans_exported(n);
                return;
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {} ms", self.timeout.as_millis()),
        };
        self.metrics.spans_dropped(n);
        self.failed_since_warning += n;
        if self.warned.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
            self.warned = Some(Instant::now());
            tracing::warn!(
                endpoint = %self.endpoint,
                %error,
                spans_dropped = self.failed_since_warning,
                "cannot export traces: their spans are dropped (counted in \
                 callbackd_telemetry_spans_dropped_total; this warning repeats at most once a minute)"
            );
            self.failed_since_warning = 0;
        }
    }
}
