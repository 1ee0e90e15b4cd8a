//! What callbackd tells the outside about itself: its log ([`logs`]: `tracing` to stderr)
//! and, when `[telemetry]` turns it on, OpenTelemetry traces of agent runs over OTLP
//! ([`traces`], docs/telemetry.md).
//!
//! ## Traces: design
//! - **From stored records, as they are stored.** The store RPC hands each committed
//!   append's event document to [`Traces::run_event`], which keeps the events a trace is
//!   made of (`on_append`). The store announces a run's end (`StoreNotice::RunEnded`, after
//!   the `runs.update` that gave its document a terminal status), and the daemon's listener
//!   (`app::run_ends`) hands the run id to [`Traces::run_ended`]. The trace is built
//!   (`collect`) from the kept events through the run's account (`crate::account`, the
//!   mapper the run API tells runs with), the run document, callbackd's records of its
//!   custom tool calls and the approvals of its held calls; a run not every event of which
//!   was seen is read back from the store instead. Every start and end time is
//!   a stored one. So runs of any client are traced (every bridge stores through callbackd,
//!   whoever started the run), and a run that spans a daemon restart still gets its whole
//!   trace when its terminal event is stored. A run whose terminal event is never stored
//!   (the bridge died with it) is not traced.
//! - **Spans built directly** (`spans`), as `opentelemetry_sdk` `SpanData` with explicit
//!   start and end times, handed to `opentelemetry-otlp`'s exporter: no tracer, no
//!   `tracing` bridge, no span held open across a run. The OpenTelemetry GenAI conventions
//!   (`invoke_agent`, `execute_tool`, `gen_ai.*`) and the OpenInference attributes Arize
//!   Phoenix reads (`openinference.span.kind`, `input.value`, `output.value`,
//!   `llm.token_count.*`) are both set. Trace and span ids are digests of the run's ids, so
//!   a run traced twice gives the same spans.
//! - **What the AGENT span carries as content**: `input.value` is the user message of the
//!   turn when callbackd recorded it (runs started through the run API), `output.value` the
//!   run's last assistant message. TOOL spans carry the call's arguments and result. All of
//!   it only with `[telemetry] capture_content = true`.
//! - **Never in the way**: `run_ended` is a `try_send`; reading back, building and
//!   exporting run on their own tasks behind bounded queues; whatever does not fit or
//!   cannot be sent is dropped and counted (`callbackd_telemetry_spans_dropped_total`),
//!   with a warning at most once a minute. See [`traces`].
//!
//! The layer: below `api` and `rpc`, above `account` (the run's account it traces) and
//! `metrics`; `app` starts it and wires it to the store's run ends.

mod collect;
mod http;
mod logs;
mod on_append;
pub mod spans;
pub mod traces;

pub use collect::Sources;
pub use logs::{init, stderr_line};
pub use traces::Traces;
