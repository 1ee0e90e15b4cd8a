//! `GET /v1/runs/{run_id}/tool_calls/{tool_call_id}`: one tool call of a run, told as the
//! run state and the stream tell it ([`ToolCall`]) with its whole arguments and result (a
//! stream event cuts values over 64 KiB; this does not), and the bridge's stored form of
//! the result (`raw_result`).

use axum::extract::{Path, State};
use axum::response::Response;
use http::StatusCode;
use serde::Serialize;
use serde_json::Value;

use super::problem::Problem;
use super::runs::no_run;
use super::{json_response, ApiState, Caller};
use crate::account::ToolCall;

/// A tool call in full.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ToolCallDetail {
    pub run_id: String,
    #[serde(flatten)]
    pub call: ToolCall,
    /// The bridge's last status of the call: `running`, `completed` or `error`.
    pub status: String,
    /// The call's result as the bridge stored it (for a custom tool, the MCP wrapper
    /// `{status, value: {content, isError}}` around the tool's own JSON), whole; `null`
    /// while it runs.
    pub raw_result: Value,
}

/// Events read per store call while looking for the call.
const PAGE: usize = 256;

pub async fn get_one(
    State(state): State<ApiState>,
    caller: Caller,
    Path((run_id, call_id)): Path<(String, String)>,
) -> Result<Response, Problem> {
    let reader = state.reader(&caller.ns);
    let doc = reader.run(&run_id).await?.ok_or_else(|| no_run(&run_id))?;
    // The bridge's last word on the call: (status, stored result).
    let mut found: Option<(String, Value)> = None;
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
            // The last event of the call wins: a retried call reuses its id.
            found = Some((
                message
                    .get("status")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                message.get("result").cloned().unwrap_or(Value::Null),
            ));
        }
        if page.len() < PAGE {
            break;
        }
    }
    let unknown = || {
        Problem::not_found(format!(
            "run {run_id} has no tool call {call_id:?} (GET /v1/runs/{run_id} lists its tool \
             calls)"
        ))
    };
    let pos = state.records().run_positions(&caller.ns, &run_id).await?;
    let calls = super::runs::tool_calls(&state, &caller.ns, &run_id, &doc, pos).await?;
    let call = calls
        .into_iter()
        .rev()
        .find(|c| c.tool_call_id == call_id)
        .ok_or_else(unknown)?;
    let (status, raw_result) = found.unwrap_or_else(|| (call.outcome.to_string(), Value::Null));
    let detail = ToolCallDetail {
        run_id: run_id.clone(),
        call,
        status,
        raw_result,
    };
    Ok(json_response(StatusCode::OK, &detail))
}
