//! A run's [`RunTrace`], once its end is stored: the run document (model, session, turn),
//! its stored events (kept as they were appended, `on_append`, or read back from the store)
//! mapped by the run's account, the [`RunMapper`] the run API tells runs with (start, end,
//! status, error, usage, output, tool calls with arguments and results), callbackd's record of each custom tool call (execution times and outcome)
//! and the approvals of its held calls (who decided, how, when).
//!
//! Everything comes from stored records (those kept are the documents the store answered
//! the appends with): a run that started before a restart is read back and traced whole
//! when it ends after it.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::spans::{ApprovalTrace, RunTrace, ToolTrace};
use crate::account::{events_after, run_doc, Beside, Durable, RunMapper, StoredEvent};
use crate::store::approvals::ApprovalRecord;
use crate::store::approvals::ApprovalRecords;
use crate::store::records::{RunRecords, ToolCallRecord};
use crate::store::{Namespace, Store};

/// Events read per store call.
const PAGE: usize = 256;

/// Where a run's records are read from.
#[derive(Clone)]
pub struct Sources {
    pub store: Arc<dyn Store>,
    pub records: Arc<dyn RunRecords>,
    pub approvals: Arc<dyn ApprovalRecords>,
}

/// The trace of run `run_id`, or `None` when it has no stored terminal event (yet): read
/// back whole from the store (a run whose events were not all seen as they were appended:
/// it began before a restart, or its events went through another daemon).
pub async fn run_trace(
    src: &Sources,
    ns: &Namespace,
    run_id: &str,
) -> Result<Option<RunTrace>, String> {
    let Some(mut b) = Builder::start(src, ns, run_id).await? else {
        return Ok(None);
    };
    let mut after = 0;
    loop {
        let page = events_after(src.store.as_ref(), ns, run_id, after, PAGE)
            .await
            .map_err(|e| e.to_string())?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        for ev in &page {
            b.feed(ev);
        }
        if page.len() < PAGE {
            break;
        }
    }
    b.finish(src, ns, run_id).await
}

/// [`run_trace`] of the events kept as they were appended (`on_append`): every event a
/// trace is built from, in seq order, and the time of the run's first event; no read of
/// the run's events.
pub async fn kept_trace(
    src: &Sources,
    ns: &Namespace,
    run_id: &str,
    events: &[StoredEvent],
    first_at_ms: i64,
) -> Result<Option<RunTrace>, String> {
    let Some(mut b) = Builder::start(src, ns, run_id).await? else {
        return Ok(None);
    };
    b.first_at = Some(first_at_ms);
    for ev in events {
        b.feed(ev);
    }
    b.finish(src, ns, run_id).await
}

/// A run's trace while its events are fed to it in seq order.
struct Builder {
    trace: RunTrace,
    mapper: RunMapper,
    records: Vec<ToolCallRecord>,
    /// The run's approvals (its held calls' decisions), by the run's index.
    approvals: Vec<ApprovalRecord>,
    ended: bool,
    first_at: Option<i64>,
    /// call id -> index in trace.tools (the last call with that id: retries reuse ids)
    by_call: HashMap<String, usize>,
}

impl Builder {
    /// From the run document and callbackd's tool call records; `None` without the document.
    async fn start(src: &Sources, ns: &Namespace, run_id: &str) -> Result<Option<Self>, String> {
        let Some(doc) = run_doc(src.store.as_ref(), ns, run_id)
            .await
            .map_err(|e| e.to_string())?
        else {
            return Ok(None);
        };
        let records = src
            .records
            .tool_calls_of_run(ns, run_id)
            .await
            .map_err(|e| e.to_string())?;
        let approvals = src
            .approvals
            .approvals_of_run(ns, run_id)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Some(Builder {
            mapper: RunMapper::new(
                &doc,
                Beside {
                    tool_calls: records.clone(),
                    approvals: approvals.clone(),
                },
            ),
            records,
            approvals,
            trace: RunTrace {
                namespace: ns.as_str().to_string(),
                run_id: run_id.to_string(),
                session_id: str_at(&doc, "/agentId").unwrap_or_default(),
                turn: doc.get("turnNumber").and_then(Value::as_u64),
                model: str_at(&doc, "/model/id"),
                ..Default::default()
            },
            ended: false,
            first_at: None,
            by_call: HashMap::new(),
        }))
    }

    /// The run's next stored event (events no span is built from may be left out).
    fn feed(&mut self, ev: &StoredEvent) {
        self.first_at.get_or_insert(ev.created_at_ms);
        let event = self.mapper.map(ev);
        // The calls still open when the run ended, closed by its terminal event just before
        // it (cancelled, or cut off): their spans end there too, as the stream tells them.
        for closed in self.mapper.take_closed() {
            self.apply(closed, ev.created_at_ms);
        }
        self.apply(event, ev.created_at_ms);
    }

    fn apply(&mut self, event: Durable, at_ms: i64) {
        let trace = &mut self.trace;
        let by_call = &mut self.by_call;
        match event {
            Durable::ToolStarted {
                tool_call_id,
                tool,
                arguments,
                ..
            } => {
                by_call.insert(tool_call_id.clone(), trace.tools.len());
                trace.tools.push(ToolTrace {
                    call_id: tool_call_id,
                    tool,
                    start_ms: at_ms,
                    end_ms: at_ms,
                    outcome: "unfinished".into(),
                    arguments: Some(arguments),
                    ..Default::default()
                });
            }
            Durable::ToolCompleted {
                tool_call_id,
                tool,
                outcome,
                result,
                ..
            } => {
                let i = *by_call.entry(tool_call_id.clone()).or_insert_with(|| {
                    trace.tools.push(ToolTrace {
                        call_id: tool_call_id,
                        tool,
                        start_ms: at_ms,
                        ..Default::default()
                    });
                    trace.tools.len() - 1
                });
                let t = &mut trace.tools[i];
                t.end_ms = at_ms;
                t.outcome = outcome.to_string();
                t.result = Some(result);
            }
            Durable::ToolOutcomeUnknown { tool_call_id, .. } => {
                if let Some(&i) = by_call.get(&tool_call_id) {
                    trace.tools[i].end_ms = at_ms;
                    trace.tools[i].outcome = "unknown".into();
                }
            }
            Durable::Usage { usage } => set_usage(trace, &usage),
            Durable::Completed {
                usage,
                status,
                output,
            } => {
                set_usage(trace, &usage);
                trace.status = status;
                trace.output = output;
                trace.end_ms = at_ms;
                self.ended = true;
            }
            Durable::Error { problem, usage, .. } => {
                set_usage(trace, &usage);
                trace.status = "error".into();
                trace.error = Some(problem.detail);
                trace.end_ms = at_ms;
                self.ended = true;
            }
            _ => {}
        }
    }

    /// The trace, with callbackd's records of the tool calls and their approvals and the
    /// run's input; `None` if no terminal event was fed.
    async fn finish(
        self,
        src: &Sources,
        ns: &Namespace,
        run_id: &str,
    ) -> Result<Option<RunTrace>, String> {
        let Builder {
            mut trace,
            records,
            approvals,
            ended,
            first_at,
            by_call,
            ..
        } = self;
        if !ended {
            return Ok(None);
        }
        trace.start_ms = first_at.unwrap_or(trace.end_ms);
        // callbackd's own record of each custom tool call: when it really ran and how it ended.
        for r in &records {
            let Some(id) = r.tool_call_id.as_deref() else {
                continue;
            };
            let Some(&i) = by_call.get(id) else { continue };
            let t = &mut trace.tools[i];
            t.start_ms = t.start_ms.min(r.started_at_ms);
            if let Some(end) = r.ended_at_ms {
                t.end_ms = t.end_ms.max(end);
            }
            if r.ended_at_ms.is_some() {
                let approval = approvals
                    .iter()
                    .rev()
                    .find(|a| a.tool_call_id.as_deref() == Some(id));
                t.outcome = crate::account::tool_call::outcome_of(r, approval).to_string();
            }
        }
        for a in approvals {
            let Some(&i) = a.tool_call_id.as_deref().and_then(|id| by_call.get(id)) else {
                continue;
            };
            let t = &mut trace.tools[i];
            t.start_ms = t.start_ms.min(a.created_at_ms);
            t.approval = Some(ApprovalTrace {
                id: a.id,
                created_ms: a.created_at_ms,
                end_ms: a.decided_at_ms.unwrap_or(t.end_ms),
                decision: a.state,
                decided_by: a.decided_by,
                reason: a.reason,
                edited: a.approved_args.is_some(),
            });
        }
        for t in &mut trace.tools {
            t.end_ms = t.end_ms.max(t.start_ms).min(trace.end_ms.max(t.start_ms));
        }
        trace.input = src
            .records
            .run_inputs(ns, &[run_id.to_string()])
            .await
            .ok()
            .and_then(|mut m| m.remove(run_id));
        Ok(Some(trace))
    }
}

fn str_at(doc: &Value, pointer: &str) -> Option<String> {
    doc.pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Token counts of a usage value (the bridge's `inputTokens`, or `input_tokens`).
fn set_usage(trace: &mut RunTrace, usage: &Value) {
    let n = |camel: &str, snake: &str| {
        usage
            .get(camel)
            .or_else(|| usage.get(snake))
            .and_then(|v| v.as_u64().or_else(|| v.as_str()?.parse().ok()))
    };
    if let Some(v) = n("inputTokens", "input_tokens") {
        trace.input_tokens = Some(v);
    }
    if let Some(v) = n("outputTokens", "output_tokens") {
        trace.output_tokens = Some(v);
    }
    if let Some(v) = n("totalTokens", "total_tokens") {
        trace.total_tokens = Some(v);
    }
}
