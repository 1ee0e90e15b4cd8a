//! `GET /v1/runs/{run_id}/tool_calls/{tool_call_id}`: one tool call of a run with its whole
//! arguments and result, read from the run's stored `tool_call` events (a stream event cuts
//! values over 64 KiB; this does not).

use axum::extract::{Path, State};
use axum::response::Response;
use http::StatusCode;
use serde::Serialize;
use serde_json::Value;

use super::events::tool_arguments;
use super::problem::Problem;
use super::runs::no_run;
use super::{json_response, ApiState, Caller};

/// A tool call in full.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ToolCallDetail {
    pub run_id: String,
    pub tool_call_id: String,
    pub tool: String,
    /// The bridge's last status of the call: `running`, `completed` or `error`.
    pub status: String,
    /// The call's arguments, whole (JSON).
    pub arguments: Value,
    /// The call's result as the bridge stored it (`{status, value}`), whole; `null` while it
    /// runs.
    pub result: Value,
}

/// Events read per store call while looking for the call.
const PAGE: usize = 256;

pub async fn get_one(
    State(state): State<ApiState>,
    caller: Caller,
    Path((run_id, call_id)): Path<(String, String)>,
) -> Result<Response, Problem> {
    let reader = state.reader(&caller.ns);
    reader.run(&run_id).await?.ok_or_else(|| no_run(&run_id))?;
    let mut found: Option<ToolCallDetail> = None;
    let mut after = 0;
    loop {
        let page = reader.events_after(&run_id, after, PAGE).await?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        for ev in &page {
            let Some(message) = ev.payload.get("message") else {
                continue;
            };
            if message.get("type").and_then(Value::as_str) != Some("tool_call")
                || message.get("call_id").and_then(Value::as_str) != Some(call_id.as_str())
            {
                continue;
            }
            let name = message.get("name").and_then(Value::as_str).unwrap_or("");
            let tool = match (
                name,
                message.pointer("/args/toolName").and_then(Value::as_str),
            ) {
                ("mcp", Some(t)) => t.to_string(),
                (n, _) => n.to_string(),
            };
            // The last event of the call wins: a retried call reuses its id.
            found = Some(ToolCallDetail {
                run_id: run_id.clone(),
                tool_call_id: call_id.clone(),
                tool,
                status: message
                    .get("status")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                arguments: tool_arguments(message),
                result: message.get("result").cloned().unwrap_or(Value::Null),
            });
        }
        if page.len() < PAGE {
            break;
        }
    }
    let detail = found.ok_or_else(|| {
        Problem::not_found(format!(
            "run {run_id} has no tool call {call_id:?} in its stored events (GET \
             /v1/runs/{run_id} lists its tool calls)"
        ))
    })?;
    Ok(json_response(StatusCode::OK, &detail))
}
