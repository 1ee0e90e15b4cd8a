//! A run's [`RunTrace`], read back from the store once its terminal event is stored: the
//! run document (model, session, turn), its stored events mapped by the run API's own
//! [`RunMapper`] (start, end, status, error, usage, output, tool calls with arguments and
//! results), callbackd's record of each custom tool call (execution times and outcome)
//! and the approvals of its held calls (who decided, how, when).
//!
//! Everything comes from stored records, none from memory of the daemon that served the
//! run: a run that started before a restart is traced whole when it ends after it.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::spans::{ApprovalTrace, RunTrace, ToolTrace};
use crate::api::events::{Durable, RunMapper};
use crate::api::reader::Reader;
use crate::api::tool_account::Beside;
use crate::store::approvals::ApprovalRecords;
use crate::store::records::RunRecords;
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

/// The trace of run `run_id`, or `None` when it has no stored terminal event (yet).
pub async fn run_trace(
    src: &Sources,
    ns: &Namespace,
    run_id: &str,
) -> Result<Option<RunTrace>, String> {
    let reader = Reader {
        store: src.store.as_ref(),
        ns,
    };
    let Some(doc) = reader.run(run_id).await.map_err(|p| p.detail)? else {
        return Ok(None);
    };
    let records = src
        .records
        .tool_calls_of_run(ns, run_id)
        .await
        .map_err(|e| e.to_string())?;
    // The run's approvals (its held calls' decisions), by the run's index.
    let approvals = src
        .approvals
        .approvals_of_run(ns, run_id)
        .await
        .map_err(|e| e.to_string())?;
    let mut mapper = RunMapper::new(
        &doc,
        Beside {
            tool_calls: records.clone(),
            approvals: approvals.clone(),
        },
    );
    let mut trace = RunTrace {
        namespace: ns.as_str().to_string(),
        run_id: run_id.to_string(),
        session_id: str_at(&doc, "/agentId").unwrap_or_default(),
        turn: doc.get("turnNumber").and_then(Value::as_u64),
        model: str_at(&doc, "/model/id"),
        ..Default::default()
    };
    let mut ended = false;
    let mut first_at: Option<i64> = None;
    // call id -> index in trace.tools (the last call with that id: retries reuse ids)
    let mut by_call: HashMap<String, usize> = HashMap::new();
    let mut after = 0;
    loop {
        let page = reader
            .events_after(run_id, after, PAGE)
            .await
            .map_err(|p| p.detail)?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        for ev in &page {
            first_at.get_or_insert(ev.created_at_ms);
            match mapper.map(ev) {
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
                        start_ms: ev.created_at_ms,
                        end_ms: ev.created_at_ms,
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
                            start_ms: ev.created_at_ms,
                            ..Default::default()
                        });
                        trace.tools.len() - 1
                    });
                    let t = &mut trace.tools[i];
                    t.end_ms = ev.created_at_ms;
                    t.outcome = outcome.to_string();
                    t.result = Some(result);
                }
                Durable::ToolOutcomeUnknown { tool_call_id, .. } => {
                    if let Some(&i) = by_call.get(&tool_call_id) {
                        trace.tools[i].end_ms = ev.created_at_ms;
                        trace.tools[i].outcome = "unknown".into();
                    }
                }
                Durable::Usage { usage } => set_usage(&mut trace, &usage),
                Durable::Completed {
                    usage,
                    status,
                    output,
                } => {
                    set_usage(&mut trace, &usage);
                    trace.status = status;
                    trace.output = output;
                    trace.end_ms = ev.created_at_ms;
                    ended = true;
                }
                Durable::Error { problem, usage, .. } => {
                    set_usage(&mut trace, &usage);
                    trace.status = "error".into();
                    trace.error = Some(problem.detail);
                    trace.end_ms = ev.created_at_ms;
                    ended = true;
                }
                _ => {}
            }
        }
        if page.len() < PAGE {
            break;
        }
    }
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
            t.outcome = crate::api::tool_account::outcome_of(r, approval).to_string();
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
