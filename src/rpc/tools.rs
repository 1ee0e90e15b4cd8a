//! `CallCustomTool`: `{toolName, args, toolCallId, agentId}` -> [`ToolRegistry`] ->
//! `{result}`.
//!
//! Connect errors are only for requests that cannot be routed: a missing `toolName` or
//! `agentId`, `args` that is not an object (`invalid_argument`), a tool this daemon does not
//! serve (`not_found`, naming it). Everything that happens inside a call — bad arguments,
//! a failure, a timeout, a panic — is an error *result* (HTTP 200, `isError: true`) that the
//! model reads (contract §4.3). One log line per call: tool, agent, outcome, latency; never
//! the arguments.

use std::sync::Arc;
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
use crate::approvals::Outcome;
use crate::clock::now_ms;
use crate::connect::{read_unary, unary_response, Code, Codec, ConnectError};
use crate::metrics::Metrics;
use crate::proto::{CallCustomToolRequest, CallCustomToolResponse};
use crate::store::records::{ToolCallStart, ToolOutcome};
use crate::store::{Namespace, RunRecords, StoreCall};
use crate::tools::invoke::{invoke, Call};
use crate::tools::{error_result, ToolError};

/// A parsed request.
struct ToolRequest {
    tool_name: String,
    agent_id: String,
    tool_call_id: Option<String>,
    args: Value,
}

pub async fn call_custom_tool(
    State(state): State<RpcState>,
    Extension(ns): Extension<Namespace>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Some(runtime) = state.tools.runtime() else {
        return serve_call(state, ns, headers, body).await;
    };
    match AbortOnDrop(runtime.spawn(serve_call(state, ns, headers, body))).await {
        Ok(response) => response,
        Err(e) => {
            tracing::error!(target: "callbackd::tools", error = %e, "a tool call's task failed");
            ConnectError::internal("internal error: the tool call failed").into_response()
        }
    }
}

/// A spawned task, aborted when whoever awaits it goes away (the bridge hung up and hyper
/// dropped the request): the tool call is then cancelled as if it ran in the request's task.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T> std::future::Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

async fn serve_call(state: RpcState, ns: Namespace, headers: HeaderMap, body: Body) -> Response {
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
    let call = match req.codec {
        Codec::Json => parse_json(&req.body)?,
        Codec::Proto => parse_proto(&req.body)?,
    };
    log.fields.tool = call.tool_name.clone();
    log.fields.agent_id = call.agent_id.clone();
    if state
        .tools
        .frontend()
        .is_frontend(&ns, &call.agent_id, &call.tool_name)
    {
        return Ok(frontend_call(state, ns, req.codec, call, log).await);
    }
    let registry = state.tools.registry();
    // A tool outside the namespace's allowlist does not exist for it: the same answer, and
    // the list names only the tools it may call.
    let allowed = |name: &str| state.namespaces.allows_tool(&ns, name);
    let Some(tool) = registry
        .get(&call.tool_name)
        .filter(|_| allowed(&call.tool_name))
    else {
        let served: Vec<&str> = registry.names().filter(|n| allowed(n)).collect();
        return Err(ConnectError::new(
            Code::NotFound,
            format!(
                "unknown custom tool {:?}: this daemon serves {}",
                call.tool_name,
                if served.is_empty() {
                    "no tools".to_string()
                } else {
                    served.join(", ")
                }
            ),
        ));
    };
    // A question to the person always waits for their answer.
    let held = tool.approval().holds(&call.args)
        || call.tool_name == crate::tools::builtin::ask_user::NAME;
    let run_id = match (&state.records, held) {
        (None, false) => None,
        _ => active_run(state, &ns, &call.agent_id).await,
    };
    let mut record = match &state.records {
        Some(records) => Recording::start(records.clone(), &ns, &call, run_id.clone(), held).await,
        None => None,
    };
    let mut args = call.args;
    if held {
        match wait_for_approval(
            state,
            &ns,
            &call.tool_name,
            &call.agent_id,
            call.tool_call_id.clone(),
            &args,
            run_id,
            &tool,
        )
        .await
        {
            Held::Run(edited) => {
                if let Some(r) = record.as_mut() {
                    r.resumed(edited.clone()).await;
                }
                if let Some(edited) = edited {
                    args = edited;
                }
            }
            Held::NotRun(error, outcome) => {
                let label = outcome.as_str();
                if let Some(r) = record.take() {
                    r.finish_unrun(outcome, &error).await;
                }
                log.error = Some(error.to_string());
                // `denied`, `expired` or `cancelled`: the same word as every view.
                return Ok((encode(req.codec, &error_result(&error)), label));
            }
        }
    }
    let outcome = invoke(
        &tool,
        args,
        Call {
            agent_id: call.agent_id,
            tool_call_id: call.tool_call_id,
            namespace: ns,
            timeout: req.timeout,
        },
    )
    .await;
    if let Some(record) = record {
        record.finish(&outcome).await;
    }
    let (result, label) = match outcome {
        Ok(value) => (crate::tools::result_of(value), "ok"),
        Err(e) => {
            // Argument errors quote the arguments, which are never logged.
            if !matches!(e, ToolError::InvalidArgs(_)) {
                log.error = Some(e.to_string());
            }
            (error_result(&e), e.outcome())
        }
    };
    Ok((encode(req.codec, &result), label))
}

/// A call of an AG-UI app's frontend tool (`super::frontend`), recorded like a held call.
async fn frontend_call(
    state: &RpcState,
    ns: Namespace,
    codec: Codec,
    call: ToolRequest,
    log: &mut CallLog<ToolLine>,
) -> (Response, &'static str) {
    let run_id = active_run(state, &ns, &call.agent_id).await;
    let mut record = match &state.records {
        Some(records) => Recording::start(records.clone(), &ns, &call, run_id.clone(), true).await,
        None => None,
    };
    let (agent_id, tool, id) = (call.agent_id, call.tool_name, call.tool_call_id);
    let outcome = super::frontend::wait(state, &ns, agent_id, tool, id, call.args, run_id).await;
    if let Some(r) = record.as_mut() {
        r.resumed(None).await;
    }
    if let Some(r) = record {
        r.finish(&outcome).await;
    }
    let (result, label) = match outcome {
        Ok(value) => (crate::tools::result_of(value), "ok"),
        Err(e) => {
            log.error = Some(e.to_string());
            (error_result(&e), e.outcome())
        }
    };
    (encode(codec, &result), label)
}

/// The agent's active run: a tool call names only the agent.
async fn active_run(state: &RpcState, ns: &Namespace, agent_id: &str) -> Option<String> {
    let doc = state
        .store
        .call(
            ns,
            StoreCall::AgentsGet {
                agent_id: agent_id.to_string(),
            },
        )
        .await
        .ok()??;
    serde_json::from_str::<Value>(&doc).ok().and_then(|d| {
        d.get("activeRunId")
            .and_then(Value::as_str)
            .map(str::to_string)
    })
}

/// How a held call's wait ended for the tool call.
enum Held {
    /// Run it (with the arguments a person edited, if any).
    Run(Option<Value>),
    /// Not run: the error the model gets, and how the record ends.
    NotRun(ToolError, ToolOutcome),
}

/// Holds a call its tool's policy holds until its approval's record says how it ended
/// (`approvals`).
#[allow(clippy::too_many_arguments)]
async fn wait_for_approval(
    state: &RpcState,
    ns: &Namespace,
    tool_name: &str,
    agent_id: &str,
    tool_call_id: Option<String>,
    args: &Value,
    run_id: Option<String>,
    tool: &crate::tools::registry::RegisteredTool,
) -> Held {
    let Some(approvals) = &state.approvals else {
        return Held::NotRun(
            ToolError::failed(
                "this call needs a person's approval, and approvals are not available here",
            ),
            ToolOutcome::Denied,
        );
    };
    let request = crate::approvals::HoldRequest {
        ns,
        agent_id,
        run_id,
        tool: tool_name,
        tool_call_id,
        args,
        timeout: tool.approval_timeout(),
        confirm: tool.confirm(),
    };
    let held = match approvals.hold(request).await {
        Ok(held) => held,
        Err(e) => {
            tracing::error!(target: "callbackd::tools", error = %e, "cannot record an approval");
            return Held::NotRun(
                ToolError::failed(
                    "this call needs a person's approval, and it could not be recorded; not run",
                ),
                ToolOutcome::Denied,
            );
        }
    };
    match held.wait().await {
        Outcome::Approved { by, args } => {
            tracing::info!(target: "callbackd::tools", tool = %tool_name, %by, edited = args.is_some(), "approved");
            Held::Run(args)
        }
        Outcome::Denied { by, reason } => Held::NotRun(
            ToolError::failed(format!(
                "a person denied this call ({by}){}; it was not run",
                reason.map(|r| format!(": {r}")).unwrap_or_default()
            )),
            ToolOutcome::Denied,
        ),
        Outcome::Expired { after } => Held::NotRun(
            ToolError::failed(format!(
                "nobody approved this call within {} s, so it was denied and not run",
                after.as_secs()
            )),
            ToolOutcome::Expired,
        ),
        Outcome::Cancelled { reason } => Held::NotRun(
            ToolError::failed(format!(
                "this call waited for a person's approval and was cancelled ({reason}); it was \
                 not run"
            )),
            ToolOutcome::Cancelled,
        ),
    }
}

/// A tool call's entry in the run API's record: started before the tool runs (or before
/// it waits for approval), ended (awaited) before the answer goes back, so the bridge's
/// completion event is never visible before the record says how the call ended. Dropped
/// unfinished (the bridge hung up and the call was aborted), it records the call as
/// cancelled: cut off mid-execution if it had started.
struct Recording {
    records: Arc<dyn RunRecords>,
    id: i64,
    started: bool,
    done: bool,
}

impl Recording {
    async fn start(
        records: Arc<dyn RunRecords>,
        ns: &Namespace,
        call: &ToolRequest,
        run_id: Option<String>,
        held: bool,
    ) -> Option<Recording> {
        let start = ToolCallStart {
            agent_id: call.agent_id.clone(),
            run_id,
            tool_call_id: call.tool_call_id.clone(),
            tool: call.tool_name.clone(),
            started_at_ms: now_ms(),
        };
        match records.tool_call_started(ns, start, held).await {
            Ok(id) => Some(Recording {
                records,
                id,
                started: !held,
                done: false,
            }),
            Err(e) => {
                tracing::warn!(target: "callbackd::tools", error = %e, "cannot record the tool call");
                None
            }
        }
    }

    /// The held call was approved (with `edited` arguments when a person changed them): it
    /// starts now.
    async fn resumed(&mut self, edited: Option<Value>) {
        self.started = true;
        if let Err(e) = self.records.tool_call_resumed(self.id, edited).await {
            tracing::warn!(target: "callbackd::tools", error = %e, "cannot record the tool call's start");
        }
    }

    /// The held call was denied, its approval expired or was cancelled: it never ran.
    async fn finish_unrun(mut self, outcome: ToolOutcome, why: &ToolError) {
        self.done = true;
        if let Err(e) = self
            .records
            .tool_call_ended(self.id, outcome, false, now_ms(), Some(error_value(why)))
            .await
        {
            tracing::warn!(target: "callbackd::tools", error = %e, "cannot record the tool call's end");
        }
    }

    async fn finish(mut self, outcome: &Result<Value, ToolError>) {
        self.done = true;
        let (result, (outcome, cut_off)) = match outcome {
            Ok(value) => (value.clone(), (ToolOutcome::Ok, false)),
            Err(e) => (
                error_value(e),
                match e {
                    ToolError::Timeout { .. } => (ToolOutcome::Timeout, true),
                    ToolError::Panicked { .. } => (ToolOutcome::Error, true),
                    _ => (ToolOutcome::Error, false),
                },
            ),
        };
        if let Err(e) = self
            .records
            .tool_call_ended(self.id, outcome, cut_off, now_ms(), Some(result))
            .await
        {
            tracing::warn!(target: "callbackd::tools", error = %e, "cannot record the tool call's end");
        }
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let (records, id, cut_off) = (self.records.clone(), self.id, self.started);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = records
                    .tool_call_ended(id, ToolOutcome::Cancelled, cut_off, now_ms(), None)
                    .await;
            });
        }
    }
}

/// What callbackd records as the result of a call that failed or never ran: the message the
/// model got, as `{"error": ...}`.
fn error_value(e: &ToolError) -> Value {
    serde_json::json!({ "error": e.to_string() })
}

fn parse_json(body: &[u8]) -> Result<ToolRequest, ConnectError> {
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
    Ok(ToolRequest {
        tool_name,
        agent_id,
        tool_call_id,
        args,
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

fn parse_proto(body: &[u8]) -> Result<ToolRequest, ConnectError> {
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
    Ok(ToolRequest {
        tool_name,
        agent_id,
        tool_call_id: req.tool_call_id.filter(|s| !s.is_empty()),
        args,
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
