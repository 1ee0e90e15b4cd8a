//! The OpenAPI document itself: every route of [`ROUTES`](super::ROUTES) as an operation,
//! with its parameters, request body, answers and the problems it can give, and
//! `StreamEvent`, the one union of every stream event.

use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{json, Map, Value};

use super::{Answer, Route, ROUTES};
use crate::account::Durable;
use crate::api::control::Control;
use crate::api::problem::Problem;

/// `StreamEvent`: every durable and control event, a `oneOf` discriminated by `type`, each
/// with the envelope fields.
fn stream_event(g: &mut SchemaGenerator) -> Value {
    let mut variants = Vec::new();
    for s in [Durable::json_schema(g), Control::json_schema(g)] {
        let v = s.to_value();
        if let Some(Value::Array(items)) = v.get("oneOf") {
            variants.extend(items.iter().cloned());
        }
    }
    for v in &mut variants {
        if let Value::Object(o) = v {
            let props = o
                .entry("properties")
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .map(std::mem::take)
                .unwrap_or_default();
            let mut all = Map::new();
            all.insert("seq".into(), json!({"type": "integer", "minimum": 0,
                "description": "the durable seq (for token and control events: the last one sent)"}));
            all.insert("run_id".into(), json!({"type": "string"}));
            all.insert(
                "at".into(),
                json!({"type": "string", "format": "date-time"}),
            );
            all.extend(props);
            o.insert("properties".into(), Value::Object(all));
            let req = o.entry("required").or_insert_with(|| json!([]));
            if let Value::Array(r) = req {
                for k in ["seq", "run_id", "at"] {
                    r.push(json!(k));
                }
            }
        }
    }
    json!({"oneOf": variants, "discriminator": {"propertyName": "type"}})
}

/// The document.
pub fn document() -> Value {
    let mut g = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| s.definitions_path = "/components/schemas".into())
        .into_generator();
    let problem = g.subschema_for::<Problem>().to_value();
    let stream = stream_event(&mut g);
    let mut paths = Map::new();
    for r in ROUTES {
        let mut op = Map::new();
        op.insert("operationId".into(), json!(r.operation_id));
        op.insert("summary".into(), json!(r.summary));
        if r.path.ends_with("/stream") && r.method == "get" {
            op.insert(
                "security".into(),
                json!([{"bearer": []}, {"streamToken": []}]),
            );
        } else {
            op.insert("security".into(), json!([{"bearer": []}]));
        }
        let params: Vec<Value> = r
            .path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
            .chain(
                (r.path.ends_with("/stream") || r.path.ends_with("/events"))
                    .then(|| json!({"name": "after", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": u64::MAX},
                        "description": "send the durable events with a larger seq"})),
            )
            .chain((r.path.ends_with("/stream") && r.method == "get").then(|| {
                json!({"name": "Last-Event-ID", "in": "header", "schema": {"type": "integer", "minimum": 0, "maximum": u64::MAX},
                    "description": "what an EventSource sends on reconnect; the larger of it and `after` wins"})
            }))
            .chain((r.method == "get" && (r.path == "/v1/sessions" || r.path.ends_with("/runs"))).then(|| {
                json!({"name": "cursor", "in": "query", "schema": {"type": "string"},
                    "description": "the `next_cursor` of the previous page"})
            }))
            .chain(
                // A session's or a run's forks are listed whole: no `limit` (Schemathesis,
                // issue 35: the document offered one that was never read).
                (r.path.ends_with("/events")
                    || (r.method == "get"
                        && r.path.ends_with("s")
                        && !r.path.ends_with("approvals")
                        && !r.path.ends_with("/forks")))
                    .then(|| json!({"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}})),
            )
            .chain(filters(r))
            .chain((r.path == "/v1/webhooks/deliveries").then(|| {
                json!({"name": "state", "in": "query", "schema": {"enum":
                    ["pending", "delivered", "failed", "all"]}})
            }))
            .chain((r.method == "get" && r.path.ends_with("approvals")).then(|| {
                json!({"name": "state", "in": "query", "schema": {"enum":
                    ["pending", "approved", "denied", "expired", "cancelled", "all"]}})
            }))
            .collect();
        op.insert("parameters".into(), Value::Array(params));
        if let Some(req) = r.request {
            op.insert(
                "requestBody".into(),
                json!({"required": true, "content": {"application/json": {"schema": req(&mut g).to_value()}}}),
            );
        }
        let mut responses = Map::new();
        match &r.answer {
            Answer::Json(status, s) => {
                responses.insert(
                    status.to_string(),
                    json!({"description": "OK", "content": {"application/json": {"schema": s(&mut g).to_value()}}}),
                );
            }
            Answer::Stream => {
                responses.insert(
                    "200".into(),
                    json!({"description": "Server-Sent Events: the first block starts with `retry: <api.retry_ms>`; \
                            each event is `id: <seq>` (durable events only) and `data: <StreamEvent JSON>`; \
                            `: keepalive` comments in between",
                           "content": {"text/event-stream": {"itemSchema": sse_item(&json!({"$ref": "#/components/schemas/StreamEvent"}))}}}),
                );
                responses.insert(
                    "204".into(),
                    json!({"description": "A terminal run with nothing after `after`"}),
                );
                responses.insert(
                    "410".into(),
                    problem_response(&problem, "replay_expired: retention removed the events"),
                );
            }
            Answer::AgUiStream => {
                responses.insert(
                    "200".into(),
                    json!({"description": "Server-Sent Events in AG-UI's encoding: each event is one \
                            `data: <AG-UI event JSON>` block (RUN_STARTED first, RUN_FINISHED or \
                            RUN_ERROR last); `: keepalive` comments in between",
                           "content": {"text/event-stream": {"itemSchema": sse_item(&ag_ui_event())}}}),
                );
            }
            Answer::Accepted => {
                responses.insert(
                    "202".into(),
                    json!({"description": "Cancellation requested"}),
                );
            }
            Answer::NoContent(what) => {
                responses.insert("204".into(), json!({"description": what}));
            }
        }
        responses.insert("400".into(), problem_response(&problem, "invalid_argument"));
        responses.insert("401".into(), problem_response(&problem, "unauthenticated"));
        if r.write {
            responses.insert(
                "403".into(),
                problem_response(&problem, "permission_denied: the read-only token"),
            );
        }
        responses.insert("404".into(), problem_response(&problem, "not_found"));
        if let Some(why) = conflict(r) {
            responses.insert("409".into(), problem_response(&problem, why));
        }
        responses.insert(
            "405".into(),
            problem_response(&problem, "method_not_allowed"),
        );
        if r.answer_streams()
            || r.method == "post" && (r.path == "/v1/sessions" || r.path.ends_with("/fork"))
        {
            responses.insert(
                "429".into(),
                problem_response(
                    &problem,
                    "resource_exhausted: api.max_streams streams are open, or a quota is reached",
                ),
            );
        }
        if r.request.is_some() {
            responses.insert(
                "413".into(),
                problem_response(&problem, "payload_too_large: over api.max_body_bytes"),
            );
        }
        if r.needs_bridge {
            responses.insert(
                "501".into(),
                problem_response(&problem, "not_implemented: no bridge attached"),
            );
            responses.insert(
                "503".into(),
                problem_response(&problem, "unavailable: the bridge is down"),
            );
        }
        op.insert("responses".into(), Value::Object(responses));
        let entry = paths.entry(r.path).or_insert_with(|| json!({}));
        if let Value::Object(e) = entry {
            e.insert(r.method.into(), Value::Object(op));
        }
    }
    let mut schemas = g
        .take_definitions(true)
        .into_iter()
        .collect::<Map<String, Value>>();
    schemas.insert("StreamEvent".into(), stream);
    paths.insert(
        "/v1/openapi.json".into(),
        json!({"get": {
            "operationId": "getOpenApi",
            "summary": "This document (no token needed)",
            "security": [],
            "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}}},
        }}),
    );
    paths.insert(
        "/v1/whoami".into(),
        json!({"get": {
            "operationId": "whoami",
            "summary": "The caller's namespace and role (`write` or `read`)",
            "security": [{"bearer": []}],
            "responses": {
                "200": {"description": "OK", "content": {"application/json": {"schema": {
                    "type": "object", "required": ["namespace", "role"],
                    "properties": {"namespace": {"type": "string"}, "role": {"enum": ["write", "read"]}}}}}},
                "401": problem_response(&problem, "unauthenticated"),
            },
        }}),
    );
    json!({
        "openapi": "3.2.0",
        "info": {"title": "callbackd run API", "version": env!("CARGO_PKG_VERSION")},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer",
                    "description": "the API token, or the read-only one (api.read_token)"},
                "streamToken": {"type": "apiKey", "in": "query", "name": "access_token",
                    "description": "a stream token from POST /v1/runs/{run_id}/stream-token: that run's stream only"},
            },
        },
    })
}

/// One server-sent event (OpenAPI 3.2 `itemSchema`): its fields as the SSE parser gives them
/// (strings), `data` JSON of `data_schema` (a run stream's
/// [`StreamEvent`](#/components/schemas/StreamEvent), an AG-UI event). A block with only
/// `retry:` (a run stream's first) has no data.
fn sse_item(data_schema: &Value) -> Value {
    json!({
        "type": "object",
        "properties": {
            "data": {"type": "string", "contentMediaType": "application/json",
                     "contentSchema": data_schema},
            "event": {"type": "string"},
            "id": {"type": "string", "description": "the event's seq (durable events only)"},
            "retry": {"type": "integer", "minimum": 0},
        },
    })
}

/// An AG-UI 1.0 event as `POST /v1/ag-ui` sends it: an object whose `type` names it
/// (docs/ag-ui.md has the mapping; `@ag-ui/core`'s `EventSchema` is the full definition).
fn ag_ui_event() -> Value {
    json!({
        "type": "object",
        "required": ["type"],
        "properties": {"type": {"type": "string", "enum": [
            "RUN_STARTED", "RUN_FINISHED", "RUN_ERROR",
            "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
            "REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT",
            "REASONING_MESSAGE_END", "REASONING_END",
            "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT",
            "ACTIVITY_SNAPSHOT"
        ]}},
    })
}

/// The search filters of the lists and of `/v1/usage` (`api::find`).
fn filters(r: &Route) -> Vec<Value> {
    let status = |allowed: &[&str]| {
        json!({"name": "status", "in": "query", "schema": {"type": "string"},
            "description": format!("one or several (comma-separated) of {}", allowed.join(", "))})
    };
    let time = |name: &str, what: &str| {
        json!({"name": name, "in": "query", "schema": {"type": "string"},
            "description": format!("{what}: RFC 3339 (2026-12-01T08:00:00Z) or a date (midnight UTC)")})
    };
    let q = |what: &str| {
        json!({"name": "q", "in": "query", "schema": {"type": "string"},
            "description": format!("case-insensitive substring of {what}")})
    };
    match (r.method, r.path) {
        ("get", "/v1/sessions") => vec![
            q("the session's name or id"),
            status(&crate::api::find::SESSION_STATUSES),
        ],
        ("get", "/v1/runs") => vec![
            q("the run's input, its output or its session's name"),
            status(&crate::api::find::RUN_STATUSES),
            json!({"name": "session_id", "in": "query", "schema": {"type": "string"}}),
            time("since", "runs created at or after"),
            time("until", "runs created before"),
        ],
        ("get", "/v1/usage") => vec![
            json!({"name": "group_by", "in": "query", "schema": {"enum": ["day", "session"]}}),
            time(
                "since",
                "runs created at or after (default: 30 days before until)",
            ),
            time("until", "runs created before (default: now)"),
        ],
        _ => vec![],
    }
}

/// What a `409 failed_precondition` of route `r` means, if it can answer one.
fn conflict(r: &Route) -> Option<&'static str> {
    match (r.method, r.path) {
        ("post", "/v1/runs/{run_id}/cancel") => {
            Some("failed_precondition: the run has already ended")
        }
        ("post", "/v1/sessions/{session_id}/messages") => {
            Some("failed_precondition: the session has an active run")
        }
        ("post", "/v1/ag-ui") => Some(
            "failed_precondition: a resume names an unknown or already decided interrupt, a \
             tool message answers a frontend tool call that does not wait, a new user message \
             arrives while the thread's run waits on an interrupt or a frontend tool call \
             (named), or the thread's session has an active run",
        ),
        ("delete", "/v1/sessions/{session_id}") => {
            Some("failed_precondition: the session has a run in progress")
        }
        ("post", "/v1/approvals/{approval_id}") => {
            Some("failed_precondition: the approval was already decided or expired")
        }
        ("post", "/v1/sessions/{session_id}/fork") => Some(
            "failed_precondition: the run has not ended, or a checkpoint blob is missing or \
             corrupted (named)",
        ),
        ("post", "/v1/runs/{run_id}/retry") => Some(
            "failed_precondition: the run has not ended, a checkpoint blob is missing or \
             corrupted (named), or no `text` was given and the run's input is not kept (a run \
             started elsewhere)",
        ),
        _ => None,
    }
}

fn problem_response(problem: &Value, what: &str) -> Value {
    json!({"description": what, "content": {"application/problem+json": {"schema": problem}}})
}
