//! [`RunTrace`] -> OpenTelemetry spans: a pure function of what callbackd stored about one
//! run, so a run traced after a daemon restart (or twice) gives the same spans, ids included.
//!
//! Span tree of a run:
//!
//! ```text
//! invoke_agent {session}            gen_ai.*, callbackd.*, openinference.span.kind=AGENT
//! ├── execute_tool {tool}           gen_ai.tool.*, callbackd.tool.outcome, kind=TOOL
//! │   └── approval {tool}           callbackd.approval.* (who, how), kind=GUARDRAIL
//! └── execute_tool {tool}
//! ```
//!
//! Ids are derived, not random: the trace id is a digest of the namespace and run id, each
//! span id a digest of the trace id and what the span is (agent, tool call, approval). A
//! collector that receives a run twice sees the same spans, and sampling (a share of trace
//! ids) keeps or drops a run whole.

use std::borrow::Cow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Everything a run's spans are made of (read by `telemetry::collect`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunTrace {
    pub namespace: String,
    pub run_id: String,
    /// The session (agent) id: `gen_ai.agent.id` and `gen_ai.conversation.id`.
    pub session_id: String,
    pub turn: Option<u64>,
    pub model: Option<String>,
    /// `finished`, `error`, `cancelled` or `expired`.
    pub status: String,
    pub error: Option<String>,
    pub start_ms: i64,
    pub end_ms: i64,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub total_tokens: Option<u64>,
    /// The user message of the turn (recorded for runs started through the run API).
    pub input: Option<String>,
    /// The last assistant message of the run.
    pub output: Option<String>,
    pub tools: Vec<ToolTrace>,
}

/// One tool call of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolTrace {
    pub call_id: String,
    pub tool: String,
    pub start_ms: i64,
    pub end_ms: i64,
    /// The run API's outcome: `ok`, `error`, `denied`, `expired`, `cancelled`, `timeout`, ...
    pub outcome: String,
    pub arguments: Option<Value>,
    pub result: Option<Value>,
    pub approval: Option<ApprovalTrace>,
}

/// The wait of a held tool call for a person's decision.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApprovalTrace {
    pub id: String,
    pub created_ms: i64,
    /// When it was decided (or the call ended, for one never decided).
    pub end_ms: i64,
    /// `approved`, `denied`, `expired`, `cancelled` (or `pending` if the run ended first).
    pub decision: String,
    pub decided_by: Option<String>,
    pub reason: Option<String>,
    /// Approved with arguments a person edited.
    pub edited: bool,
}

/// The run's trace id.
pub fn trace_id(namespace: &str, run_id: &str) -> TraceId {
    let d = digest(&[namespace.as_bytes(), run_id.as_bytes()]);
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    if b == [0; 16] {
        b[15] = 1;
    }
    TraceId::from_bytes(b)
}

/// Whether a run with this trace id is kept at `ratio` (the W3C/OTel ratio sampler's rule:
/// the trace id's low 8 bytes below `ratio` of the range).
pub fn sampled(trace: TraceId, ratio: f64) -> bool {
    if ratio >= 1.0 {
        return true;
    }
    if ratio <= 0.0 {
        return false;
    }
    let bytes = trace.to_bytes();
    let mut low = [0u8; 8];
    low.copy_from_slice(&bytes[8..]);
    let x = u64::from_be_bytes(low) >> 1;
    (x as f64) < ratio * (u64::MAX >> 1) as f64
}

fn digest(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    h.finalize().into()
}

fn span_id(trace: TraceId, what: &[&[u8]]) -> SpanId {
    let t = trace.to_bytes();
    let mut parts: Vec<&[u8]> = vec![&t];
    parts.extend_from_slice(what);
    let d = digest(&parts);
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    if b == [0; 8] {
        b[7] = 1;
    }
    SpanId::from_bytes(b)
}

fn time(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

fn scope() -> InstrumentationScope {
    InstrumentationScope::builder("callbackd")
        .with_version(env!("CARGO_PKG_VERSION"))
        .build()
}

fn kv(key: &'static str, value: impl Into<opentelemetry::Value>) -> KeyValue {
    KeyValue::new(key, value)
}

fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// JSON text of a captured value (a string stays as it is).
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

struct Span<'a> {
    trace: TraceId,
    id: SpanId,
    parent: SpanId,
    name: String,
    start_ms: i64,
    end_ms: i64,
    attributes: Vec<KeyValue>,
    status: Status,
    scope: &'a InstrumentationScope,
}

impl Span<'_> {
    fn data(self) -> SpanData {
        SpanData {
            span_context: SpanContext::new(
                self.trace,
                self.id,
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: self.parent,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: Cow::Owned(self.name),
            start_time: time(self.start_ms),
            end_time: time(self.end_ms.max(self.start_ms)),
            attributes: self.attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: self.status,
            instrumentation_scope: self.scope.clone(),
        }
    }
}

/// The spans of `run`: the agent span first, then each tool span followed by its approval
/// span. Content (input, output, arguments, results) only with `capture_content`.
pub fn spans(run: &RunTrace, capture_content: bool) -> Vec<SpanData> {
    let scope = scope();
    let trace = trace_id(&run.namespace, &run.run_id);
    let agent_id = span_id(trace, &[b"agent"]);
    let mut attributes = vec![
        kv("gen_ai.operation.name", "invoke_agent"),
        kv("gen_ai.provider.name", "cursor"),
        kv("gen_ai.agent.id", run.session_id.clone()),
        kv("gen_ai.conversation.id", run.session_id.clone()),
        kv("callbackd.run_id", run.run_id.clone()),
        kv("callbackd.namespace", run.namespace.clone()),
        kv("callbackd.run.status", run.status.clone()),
        kv("openinference.span.kind", "AGENT"),
        kv("session.id", run.session_id.clone()),
    ];
    if let Some(turn) = run.turn {
        attributes.push(kv("callbackd.turn", int(turn)));
    }
    if let Some(model) = &run.model {
        attributes.push(kv("gen_ai.request.model", model.clone()));
        attributes.push(kv("llm.model_name", model.clone()));
    }
    if let Some(n) = run.input_tokens {
        attributes.push(kv("gen_ai.usage.input_tokens", int(n)));
        attributes.push(kv("llm.token_count.prompt", int(n)));
    }
    if let Some(n) = run.output_tokens {
        attributes.push(kv("gen_ai.usage.output_tokens", int(n)));
        attributes.push(kv("llm.token_count.completion", int(n)));
    }
    let total = run
        .total_tokens
        .or_else(|| Some(run.input_tokens? + run.output_tokens?));
    if let Some(n) = total {
        attributes.push(kv("llm.token_count.total", int(n)));
    }
    if let Some(error) = &run.error {
        attributes.push(kv("error.type", run.status.clone()));
        attributes.push(kv("callbackd.run.error", error.clone()));
    }
    if capture_content {
        if let Some(input) = &run.input {
            attributes.push(kv("input.value", input.clone()));
            attributes.push(kv("input.mime_type", "text/plain"));
        }
        if let Some(output) = &run.output {
            attributes.push(kv("output.value", output.clone()));
            attributes.push(kv("output.mime_type", "text/plain"));
        }
    }
    let status = match (&run.error, run.status.as_str()) {
        (Some(e), _) => Status::error(e.clone()),
        (None, "error") => Status::error("the run ended in error"),
        _ => Status::Ok,
    };
    let mut out = vec![Span {
        trace,
        id: agent_id,
        parent: SpanId::INVALID,
        name: format!("invoke_agent {}", run.session_id),
        start_ms: run.start_ms,
        end_ms: run.end_ms,
        attributes,
        status,
        scope: &scope,
    }
    .data()];
    for (i, tool) in run.tools.iter().enumerate() {
        // A call id can repeat in a run (a retried call): the index keeps span ids apart.
        let index = (i as u64).to_be_bytes();
        let tool_id = span_id(trace, &[b"tool", tool.call_id.as_bytes(), &index]);
        let mut attributes = vec![
            kv("gen_ai.operation.name", "execute_tool"),
            kv("gen_ai.tool.name", tool.tool.clone()),
            kv("gen_ai.tool.call.id", tool.call_id.clone()),
            kv("gen_ai.tool.type", "function"),
            kv("callbackd.tool.outcome", tool.outcome.clone()),
            kv("callbackd.run_id", run.run_id.clone()),
            kv("openinference.span.kind", "TOOL"),
            kv("tool.name", tool.tool.clone()),
        ];
        if capture_content {
            if let Some(args) = &tool.arguments {
                attributes.push(kv("gen_ai.tool.call.arguments", text_of(args)));
                attributes.push(kv("input.value", text_of(args)));
                attributes.push(kv("input.mime_type", "application/json"));
            }
            if let Some(result) = &tool.result {
                attributes.push(kv("gen_ai.tool.call.result", text_of(result)));
                attributes.push(kv("output.value", text_of(result)));
                attributes.push(kv("output.mime_type", "application/json"));
            }
        }
        let status = if tool.outcome == "ok" {
            Status::Ok
        } else {
            attributes.push(kv("error.type", tool.outcome.clone()));
            Status::error(format!("the tool call ended {}", tool.outcome))
        };
        out.push(
            Span {
                trace,
                id: tool_id,
                parent: agent_id,
                name: format!("execute_tool {}", tool.tool),
                start_ms: tool.start_ms,
                end_ms: tool.end_ms,
                attributes,
                status,
                scope: &scope,
            }
            .data(),
        );
        if let Some(a) = &tool.approval {
            let mut attributes = vec![
                kv("callbackd.approval.id", a.id.clone()),
                kv("callbackd.approval.decision", a.decision.clone()),
                kv("callbackd.approval.edited", a.edited),
                kv("gen_ai.tool.name", tool.tool.clone()),
                kv("gen_ai.tool.call.id", tool.call_id.clone()),
                kv("callbackd.run_id", run.run_id.clone()),
                kv("openinference.span.kind", "GUARDRAIL"),
            ];
            if let Some(by) = &a.decided_by {
                attributes.push(kv("callbackd.approval.decided_by", by.clone()));
            }
            if let Some(reason) = &a.reason {
                attributes.push(kv("callbackd.approval.reason", reason.clone()));
            }
            out.push(
                Span {
                    trace,
                    id: span_id(trace, &[b"approval", a.id.as_bytes()]),
                    parent: tool_id,
                    name: format!("approval {}", tool.tool),
                    start_ms: a.created_ms,
                    end_ms: a.end_ms,
                    attributes,
                    status: Status::Unset,
                    scope: &scope,
                }
                .data(),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a opentelemetry::Value> {
        span.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| &kv.value)
    }

    fn run() -> RunTrace {
        RunTrace {
            namespace: "default".into(),
            run_id: "run-1".into(),
            session_id: "agent-1".into(),
            turn: Some(2),
            model: Some("composer-2".into()),
            status: "finished".into(),
            start_ms: 1_000,
            end_ms: 9_000,
            input_tokens: Some(120),
            output_tokens: Some(30),
            input: Some("list the files".into()),
            output: Some("done".into()),
            tools: vec![ToolTrace {
                call_id: "call-1".into(),
                tool: "write_file".into(),
                start_ms: 2_000,
                end_ms: 5_000,
                outcome: "ok".into(),
                arguments: Some(json!({"path": "a.txt", "secret": "s3cr3t"})),
                result: Some(json!({"status": "success"})),
                approval: Some(ApprovalTrace {
                    id: "apr-1".into(),
                    created_ms: 2_000,
                    end_ms: 4_000,
                    decision: "approved".into(),
                    decided_by: Some("alice".into()),
                    reason: None,
                    edited: false,
                }),
            }],
            ..Default::default()
        }
    }

    #[test]
    fn a_run_is_an_agent_span_with_tool_and_approval_children() {
        let spans = spans(&run(), false);
        assert_eq!(spans.len(), 3);
        let (agent, tool, approval) = (&spans[0], &spans[1], &spans[2]);
        assert_eq!(agent.name, "invoke_agent agent-1");
        assert_eq!(agent.parent_span_id, SpanId::INVALID);
        assert_eq!(tool.parent_span_id, agent.span_context.span_id());
        assert_eq!(approval.parent_span_id, tool.span_context.span_id());
        for s in &spans {
            assert_eq!(s.span_context.trace_id(), trace_id("default", "run-1"));
            assert_ne!(s.span_context.trace_id(), TraceId::INVALID);
        }
        assert_eq!(agent.start_time, time(1_000));
        assert_eq!(agent.end_time, time(9_000));
        assert_eq!(
            attr(agent, "gen_ai.request.model").unwrap().as_str(),
            "composer-2"
        );
        assert_eq!(
            attr(agent, "gen_ai.usage.input_tokens"),
            Some(&opentelemetry::Value::I64(120))
        );
        assert_eq!(
            attr(agent, "llm.token_count.total"),
            Some(&opentelemetry::Value::I64(150))
        );
        assert_eq!(
            attr(agent, "openinference.span.kind").unwrap().as_str(),
            "AGENT"
        );
        assert_eq!(tool.name, "execute_tool write_file");
        assert_eq!(
            attr(tool, "gen_ai.tool.call.id").unwrap().as_str(),
            "call-1"
        );
        assert_eq!(
            attr(approval, "callbackd.approval.decided_by")
                .unwrap()
                .as_str(),
            "alice"
        );
        assert_eq!(approval.end_time, time(4_000));
    }

    #[test]
    fn content_only_when_asked() {
        let without = spans(&run(), false);
        for s in &without {
            for key in [
                "input.value",
                "output.value",
                "gen_ai.tool.call.arguments",
                "gen_ai.tool.call.result",
            ] {
                assert!(attr(s, key).is_none(), "{key} in {}", s.name);
            }
            assert!(!format!("{:?}", s.attributes).contains("s3cr3t"));
        }
        let with = spans(&run(), true);
        assert_eq!(
            attr(&with[0], "input.value").unwrap().as_str(),
            "list the files"
        );
        assert!(attr(&with[1], "input.value")
            .unwrap()
            .as_str()
            .contains("s3cr3t"));
    }

    #[test]
    fn a_failed_run_carries_its_error_and_ids_are_stable() {
        let mut r = run();
        r.status = "error".into();
        r.error = Some("[unavailable] model down".into());
        let a = spans(&r, false);
        assert_eq!(a[0].status, Status::error("[unavailable] model down"));
        let b = spans(&r, false);
        let ids = |s: &[SpanData]| {
            s.iter()
                .map(|s| s.span_context.span_id())
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&a), ids(&b));
    }

    #[test]
    fn sampling_keeps_about_the_ratio_and_whole_runs() {
        let kept = (0..10_000)
            .filter(|i| sampled(trace_id("default", &format!("run-{i}")), 0.25))
            .count();
        assert!((2_200..2_800).contains(&kept), "{kept}");
        assert!(sampled(trace_id("a", "b"), 1.0));
        assert!(!sampled(trace_id("a", "b"), 0.0));
    }
}
