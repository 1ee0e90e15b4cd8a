//! `CallCustomTool`, the protocol: `{toolName, args, toolCallId, agentId}` is decoded into
//! a `tool_calls::ToolCallRequest`, served by `tool_calls::ToolCalls::call` (allowlist,
//! recording, holding, invoking) in the request's namespace, and its answer encoded as
//! `{result}` and logged.
//!
//! Connect errors are only for requests that cannot be routed: a missing `toolName` or
//! `agentId`, `args` that is not an object (`invalid_argument`), a tool this daemon does not
//! serve (`not_found`, naming it). Everything that happens inside a call — bad arguments,
//! a failure, a timeout, a panic — is an error *result* (HTTP 200, `isError: true`) that the
//! model reads (contract §4.3). One log line per call: tool, agent, outcome, latency; never
//! the arguments.

use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use http::HeaderMap;
use prost::Message;
use serde_json::{Map, Value};

use super::call_log::{CallFields, CallLog};
use super::codec::{json_to_struct, struct_to_json};
use super::RpcState;
use crate::connect::{read_unary, unary_response, Code, Codec, ConnectError};
use crate::metrics::Metrics;
use crate::proto::{CallCustomToolRequest, CallCustomToolResponse};
use crate::store::Namespace;
use crate::tool_calls::{ToolCallError, ToolCallRequest};

pub async fn call_custom_tool(
    State(state): State<RpcState>,
    Extension(ns): Extension<Namespace>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let mut log = CallLog::start(ToolLine {
        tool: "?".into(),
        agent_id: "?".into(),
        ns: ns.clone(),
        metrics: state.metrics.clone(),
    });
    let response = handle(&state, ns, &headers, body, &mut log).await;
    log.finish(match &response {
        Ok((_, outcome)) => outcome,
        Err(e) => e.code.as_str(),
    });
    match response {
        Ok((response, _)) => response,
        Err(e) => e.into_response(),
    }
}

async fn handle(
    state: &RpcState,
    ns: Namespace,
    headers: &HeaderMap,
    body: Body,
    log: &mut CallLog<ToolLine>,
) -> Result<(Response, &'static str), ConnectError> {
    let req = read_unary(headers, body, state.limits).await?;
    let mut call = match req.codec {
        Codec::Json => parse_json(&req.body)?,
        Codec::Proto => parse_proto(&req.body)?,
    };
    call.timeout = req.timeout;
    log.fields.tool = call.tool_name.clone();
    log.fields.agent_id = call.agent_id.clone();
    let answer = state.tool_calls.call(ns, call).await?;
    log.error = answer.error;
    Ok((encode(req.codec, &answer.result), answer.outcome))
}

impl From<ToolCallError> for ConnectError {
    fn from(e: ToolCallError) -> Self {
        match e {
            ToolCallError::UnknownTool { .. } => ConnectError::new(Code::NotFound, e.to_string()),
            ToolCallError::Failed => ConnectError::internal(e.to_string()),
        }
    }
}

fn parse_json(body: &[u8]) -> Result<ToolCallRequest, ConnectError> {
    let text = std::str::from_utf8(body)
        .map_err(|_| ConnectError::invalid_argument("request body is not valid UTF-8"))?;
    let text = if text.trim().is_empty() { "{}" } else { text };
    let value: Value = serde_json::from_str(text).map_err(|e| {
        ConnectError::invalid_argument(format!(
            "invalid JSON for sdk.v1.CallCustomToolRequest: {e}"
        ))
    })?;
    let Value::Object(mut obj) = value else {
        return Err(ConnectError::invalid_argument(
            "request body must be a JSON object (sdk.v1.CallCustomToolRequest)",
        ));
    };
    // proto3 JSON accepts the JSON name and the proto field name alike; anything else is
    // named, before a misspelled field could be reported as a missing one.
    const FIELDS: [&str; 4] = ["toolName", "args", "toolCallId", "agentId"];
    const PROTO_NAMES: [&str; 3] = ["tool_name", "tool_call_id", "agent_id"];
    if let Some(field) = obj
        .keys()
        .find(|k| !FIELDS.contains(&k.as_str()) && !PROTO_NAMES.contains(&k.as_str()))
    {
        return Err(super::unknown_field::unknown_field(
            "sdk.v1.CallCustomToolRequest",
            field,
            &FIELDS,
        ));
    }
    let mut take = |json: &str, proto: &str| match obj.remove(json) {
        Some(v) => Some(v),
        None => obj.remove(proto),
    };
    let tool_name = required_string(take("toolName", "tool_name"), "toolName")?;
    let agent_id = required_string(take("agentId", "agent_id"), "agentId")?;
    let tool_call_id = match take("toolCallId", "tool_call_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s).filter(|s| !s.is_empty()),
        Some(_) => {
            return Err(ConnectError::invalid_argument(
                "toolCallId must be a string",
            ))
        }
    };
    let args = match take("args", "args") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(v @ Value::Object(_)) => v,
        Some(_) => return Err(ConnectError::invalid_argument("args must be a JSON object")),
    };
    Ok(ToolCallRequest {
        tool_name,
        agent_id,
        tool_call_id,
        args,
        timeout: None,
    })
}

fn required_string(v: Option<Value>, name: &str) -> Result<String, ConnectError> {
    match v {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        None | Some(Value::Null) | Some(Value::String(_)) => Err(ConnectError::invalid_argument(
            format!("{name} is required"),
        )),
        Some(_) => Err(ConnectError::invalid_argument(format!(
            "{name} must be a string"
        ))),
    }
}

fn parse_proto(body: &[u8]) -> Result<ToolCallRequest, ConnectError> {
    let req = CallCustomToolRequest::decode(body).map_err(|e| {
        ConnectError::invalid_argument(format!(
            "invalid protobuf for sdk.v1.CallCustomToolRequest: {e}"
        ))
    })?;
    let args = match &req.args {
        Some(s) => struct_to_json(s)
            .map_err(|e| ConnectError::invalid_argument(format!("invalid args: {e}")))?,
        None => Value::Object(Map::new()),
    };
    let tool_name = required_string(Some(Value::String(req.tool_name)), "toolName")?;
    let agent_id = required_string(Some(Value::String(req.agent_id)), "agentId")?;
    Ok(ToolCallRequest {
        tool_name,
        agent_id,
        tool_call_id: req.tool_call_id.filter(|s| !s.is_empty()),
        args,
        timeout: None,
    })
}

fn encode(codec: Codec, result: &Value) -> Response {
    match codec {
        Codec::Json => {
            let body = serde_json::json!({ "result": result }).to_string();
            unary_response(Codec::Json, body)
        }
        Codec::Proto => {
            // Results are always objects by now (`result_of` wraps everything else).
            let response = CallCustomToolResponse {
                result: json_to_struct(result),
            };
            unary_response(Codec::Proto, response.encode_to_vec())
        }
    }
}

/// The tools' log line: tool and agent, never the arguments.
struct ToolLine {
    tool: String,
    agent_id: String,
    ns: Namespace,
    metrics: Metrics,
}

impl CallFields for ToolLine {
    fn write(&self, outcome: &'static str, latency: Duration, error: Option<&str>) {
        // Only served tools get series of their own: a name is set before the registry
        // lookup, and the one Connect error after it is `not_found`.
        let tool = match (self.tool.as_str(), outcome) {
            ("?", _) => crate::metrics::UNDECODED,
            (_, "not_found") => crate::metrics::UNKNOWN_TOOL,
            (tool, _) => tool,
        };
        self.metrics
            .tool_call(self.ns.as_str(), tool, outcome, latency);
        // An `Option` field is left out of the line when `None`. A call that went well is
        // a `debug` line: at the default level the log keeps runs, approvals and errors.
        macro_rules! line {
            ($level:ident) => {
                tracing::$level!(
                    target: "callbackd::tools",
                    namespace = self.ns.as_str(),
                    tool = %self.tool,
                    agent_id = %self.agent_id,
                    outcome,
                    latency_us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX),
                    error = error.map(tracing::field::display)
                )
            };
        }
        if outcome == "ok" {
            line!(debug);
        } else {
            line!(info);
        }
    }
}
