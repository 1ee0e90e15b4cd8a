//! `/v1/runs/{run_id}`: the run's state, its events as a page or a stream, and cancel.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use http::{HeaderMap, StatusCode, Uri};
use serde::Serialize;
use serde_json::{json, Value};

use super::bridge::bridge_problem;
use super::feed::{FeedError, RunCtx};
use super::problem::{Problem, ProblemCode};
use super::reader::{is_terminal, RunSummary};
use super::stream::{self, StreamPlan};
use super::{json_response, limit, position, query, ApiState, Caller};
use crate::account::tool_call::{self, ToolCall};
use crate::account::Durable;
use crate::bridge::Ended;
use crate::clock::rfc3339_ms;
use crate::run::RunStatus;
use crate::server::ConnSlot;
use crate::store::Namespace;

/// `GET /v1/runs/{run_id}`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct RunState {
    #[serde(flatten)]
    pub run: RunSummary,
    /// Every tool call of the run, in the order they started, each told as the stream's
    /// `tool_completed` tells it (with its arguments and result, whole).
    pub tool_calls: Vec<ToolCall>,
    pub events_expired_through: u64,
}

/// A page of events.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct EventPage {
    /// Each exactly the `data:` the stream sends for it.
    #[schemars(with = "Vec<super::schema::StreamEventRef>")]
    pub events: Vec<Box<serde_json::value::RawValue>>,
    pub next_after: Option<u64>,
}

/// A run's summary. The bridge stores the terminal event 10-60 ms before it updates the run
/// document: in that window the summary answers what the stream already said. With `exact`
/// (`GET /v1/runs/{run_id}`), `output`, `usage` and `error` are those of the stream's own
/// terminal event (`completed` or `error`), made by the same mapper from the same stored
/// events, so the state and the stream agree whatever the document holds (cursor-sdk 1.1.0
/// sets `result` late, and stores only an error code in `error`). Without it (lists), the
/// status and error come from the last stored event and the rest from the document.
pub async fn summary(
    state: &ApiState,
    ns: &Namespace,
    doc: &Value,
    pos: crate::store::records::RunPositions,
    exact: bool,
) -> Result<RunSummary, Problem> {
    let run_id = doc.get("runId").and_then(Value::as_str).unwrap_or_default();
    // A run started by another client gets its prompt here too once its `user` event is
    // stored, before anybody has read its stream.
    let prompt = super::prompt::Prompt { state, ns, run_id };
    let input = prompt.known().await;
    let last = last_event(state, ns, run_id, pos).await?;
    summary_of(state, ns, doc, pos, exact, input, last).await
}

/// [`summary`] of what was already read: the run's input text and its last stored event
/// (a page of runs reads them for all its runs in one store call each).
pub async fn summary_of(
    state: &ApiState,
    ns: &Namespace,
    doc: &Value,
    pos: crate::store::records::RunPositions,
    exact: bool,
    input: Option<String>,
    last: Option<crate::account::StoredEvent>,
) -> Result<RunSummary, Problem> {
    let mut run = RunSummary::from_doc(doc, pos.last_seq);
    run.input = input.map(crate::account::RunInput::whole);
    let Some(last) = last else {
        return Ok(run);
    };
    let Some(status) = terminal_status(&last) else {
        return Ok(run);
    };
    run.status = status;
    let end = if exact {
        let ctx = RunCtx {
            state,
            ns,
            run_id: &run.run_id,
            run_doc: doc,
        };
        match ctx.mapper_at(last.seq - 1).await {
            Ok(mut own) if own.at == last.seq - 1 => own.mapper.map(&last),
            // A hole before the end: what the stream would say is a stream_gap.
            _ => return Ok(run),
        }
    } else {
        // The terminal event alone: its problem, or nothing new.
        crate::account::RunMapper::new(doc, Default::default()).map(&last)
    };
    match end {
        Durable::Completed { usage, output, .. } => {
            run.error = None;
            if exact {
                run.output = output;
                run.usage = usage;
            }
        }
        Durable::Error { problem, usage, .. } => {
            run.error = Some(problem);
            run.output = None;
            if exact {
                run.usage = usage;
            }
        }
        _ => {}
    }
    Ok(run)
}

/// The run's last stored event, unless it was removed by retention.
async fn last_event(
    state: &ApiState,
    ns: &Namespace,
    id: &str,
    pos: crate::store::records::RunPositions,
) -> Result<Option<crate::account::StoredEvent>, Problem> {
    if !has_last(pos) {
        return Ok(None);
    }
    let reader = state.reader(ns);
    let last = reader.events_after(id, pos.last_seq - 1, 1).await?;
    Ok(last.into_iter().next().filter(|ev| ev.seq == pos.last_seq))
}

/// Whether a run at `pos` has a last event still stored (not none, not removed by
/// retention).
pub fn has_last(pos: crate::store::records::RunPositions) -> bool {
    pos.last_seq > 0 && pos.last_seq > pos.expired_through
}

/// The status of the run's last stored event when that is its terminal one (`finished`,
/// `error`, ...): the run has ended, whatever its document says yet.
pub async fn stored_end(
    state: &ApiState,
    ns: &Namespace,
    id: &str,
    pos: crate::store::records::RunPositions,
) -> Result<Option<String>, Problem> {
    Ok(last_event(state, ns, id, pos)
        .await?
        .as_ref()
        .and_then(terminal_status))
}

/// The run status a stored terminal `status` event stands for.
fn terminal_status(ev: &crate::account::StoredEvent) -> Option<String> {
    if ev.payload.pointer("/message/type").and_then(Value::as_str) != Some("status") {
        return None;
    }
    let status = ev
        .payload
        .pointer("/message/status")
        .and_then(Value::as_str)
        .and_then(crate::run::RunStatus::parse_event)?;
    status.is_terminal().then(|| status.to_string())
}

pub fn no_run(id: &str) -> Problem {
    Problem::not_found(format!(
        "no run {id:?} (GET /v1/sessions/{{session_id}}/runs lists a session's runs)"
    ))
}

async fn run_doc(state: &ApiState, ns: &Namespace, id: &str) -> Result<Value, Problem> {
    state.reader(ns).run(id).await?.ok_or_else(|| no_run(id))
}

pub async fn get_one(
    State(state): State<ApiState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let doc = run_doc(&state, &caller.ns, &id).await?;
    let pos = state.records().run_positions(&caller.ns, &id).await?;
    let run = summary(&state, &caller.ns, &doc, pos, true).await?;
    let tool_calls = tool_calls(&state, &caller.ns, &id, &doc, pos).await?;
    Ok(json_response(
        StatusCode::OK,
        &RunState {
            run,
            tool_calls,
            events_expired_through: pos.expired_through,
        },
    ))
}

/// The run's tool calls: the stored events mapped as the stream maps them, what callbackd's
/// records say of the calls still open, and the recorded calls whose events are gone.
pub async fn tool_calls(
    state: &ApiState,
    ns: &Namespace,
    id: &str,
    doc: &Value,
    pos: crate::store::records::RunPositions,
) -> Result<Vec<ToolCall>, Problem> {
    let ctx = RunCtx {
        state,
        ns,
        run_id: id,
        run_doc: doc,
    };
    let beside = ctx.beside().await?;
    let mut calls = if pos.expired_through == 0 {
        match ctx.mapper_at(pos.last_seq).await {
            Ok(own) => own.mapper.calls().to_vec(),
            Err(FeedError::Gap { reason, .. }) => return Err(Problem::internal(reason)),
        }
    } else {
        Vec::new()
    };
    for call in calls.iter_mut() {
        if matches!(call.outcome, "running") {
            tool_call::overlay_open(call, &beside);
        } else if call.decision.is_none() && call.question.is_none() {
            // Closed by its run's end: what became of its approval.
            let approval = beside.approval(&call.tool_call_id);
            (call.decision, call.question) = tool_call::decision_and_question(approval, &call.tool);
        }
    }
    for r in &beside.tool_calls {
        let known = r
            .tool_call_id
            .as_deref()
            .is_some_and(|c| calls.iter().any(|k| k.tool_call_id == c));
        if !known {
            calls.push(tool_call::from_record(r, &beside));
        }
    }
    Ok(calls)
}

fn expired(id: &str, through: u64) -> Problem {
    Problem::new(
        ProblemCode::ReplayExpired,
        format!(
            "the events of run {id} up to seq {through} were removed by retention; \
             GET /v1/runs/{id} still has the run's state"
        ),
    )
}

pub async fn events(
    State(state): State<ApiState>,
    caller: Caller,
    Path(id): Path<String>,
    uri: Uri,
) -> Result<Response, Problem> {
    let q = query(&uri)?;
    let after = position(q.get("after").map(String::as_str), &HeaderMap::new())?;
    let limit = limit(q.get("limit").map(String::as_str), 100)?;
    let doc = run_doc(&state, &caller.ns, &id).await?;
    let pos = state.records().run_positions(&caller.ns, &id).await?;
    if after < pos.expired_through {
        return Err(expired(&id, pos.expired_through));
    }
    // Made as the stream makes its frames, so the page holds the same bytes.
    let ctx = RunCtx {
        state: &state,
        ns: &caller.ns,
        run_id: &id,
        run_doc: &doc,
    };
    let missing = |e: FeedError| match e {
        FeedError::Gap { reason, .. } => Problem::internal(reason),
    };
    let mut own = ctx.mapper_at(after).await.map_err(missing)?;
    let mut out = Vec::new();
    let mut seq = after;
    'pages: loop {
        let page = ctx.page(seq).await.map_err(missing)?;
        if page.is_empty() {
            break;
        }
        for ev in &page {
            seq = ev.seq;
            let (data, _) = ctx.event(&mut own.mapper, ev).await;
            for data in data {
                out.push(
                    serde_json::value::RawValue::from_string(data)
                        .map_err(|e| Problem::internal(e.to_string()))?,
                );
            }
            if out.len() >= limit {
                break 'pages;
            }
        }
    }
    let next_after = (seq < pos.last_seq && !out.is_empty()).then_some(seq);
    Ok(json_response(
        StatusCode::OK,
        &EventPage {
            events: out,
            next_after,
        },
    ))
}

/// `GET /v1/runs/{run_id}/stream`.
pub async fn stream(
    State(state): State<ApiState>,
    caller: Caller,
    Path(id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    conn: Option<Extension<ConnSlot>>,
) -> Result<Response, Problem> {
    let q = query(&uri)?;
    let after = position(q.get("after").map(String::as_str), &headers)?;
    let doc = run_doc(&state, &caller.ns, &id).await?;
    open(&state, caller, id, doc, after, None, conn.map(|c| c.0)).await
}

/// Opens a stream of run `id` from `after`, or answers 204 or 410.
pub async fn open(
    state: &ApiState,
    caller: Caller,
    id: String,
    doc: Value,
    after: u64,
    tokens: Option<super::live_tokens::Relay>,
    conn: Option<ConnSlot>,
) -> Result<Response, Problem> {
    let ns = caller.ns.clone();
    let pos = state.records().run_positions(&ns, &id).await?;
    if after < pos.expired_through {
        return Err(expired(&id, pos.expired_through));
    }
    if pos.last_seq <= after
        && (is_terminal(&doc) || stored_end(state, &ns, &id, pos).await?.is_some())
    {
        // Nothing after the position of a run that has ended; its terminal event may be
        // stored while the document still says running (the bridge updates it 10-60 ms
        // later, or never, if it was killed in between).
        return Ok(stream::no_content());
    }
    let permit = state.stream_slot(&ns)?;
    Ok(stream::respond(
        state.clone(),
        StreamPlan {
            ns,
            caller,
            run_id: id,
            run_doc: doc,
            after,
            tokens,
            permit,
            conn,
        },
    ))
}

/// `POST /v1/runs/{run_id}/cancel`.
pub async fn cancel(
    State(state): State<ApiState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    caller.require_write("cancel runs")?;
    let doc = run_doc(&state, &caller.ns, &id).await?;
    if is_terminal(&doc) {
        return Err(Problem::new(
            ProblemCode::FailedPrecondition,
            format!(
                "run {id} has already ended ({}); there is nothing to cancel",
                doc.get("status").and_then(Value::as_str).unwrap_or("?")
            ),
        ));
    }
    let agent = doc
        .get("agentId")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let reason = format!("its run {id} was cancelled (POST /v1/runs/{id}/cancel)");
    // Its held calls first: a cancelled run's tool call never runs, whatever a person
    // decides next (the record says so before the bridge hears of the cancellation).
    state.approvals().cancel_run(&caller.ns, &id, &reason).await;
    let unknown = match state.bridge(&caller.ns).get() {
        Err(_) => "no bridge is attached".to_string(),
        Ok(bridge) => match bridge.cancel_run(&id, agent).await {
            Ok(()) => return Ok(cancelling(&id, "cancelling")),
            Err(e) if bridge_does_not_know(&e) => {
                format!("the bridge does not know it ({})", e.message())
            }
            Err(e) => return Err(bridge_problem("CancelRun", &e)),
        },
    };
    // No bridge can finish it (the one that ran it is gone): callbackd ends it itself.
    let ended = state
        .ender()
        .end(
            &caller.ns,
            agent,
            &id,
            RunStatus::Cancelled,
            &format!("{reason}; {unknown}"),
        )
        .await?;
    match ended {
        Ended::Now(_) => Ok(cancelling(&id, "cancelled")),
        // Its own end won the race: one terminal status, the first.
        Ended::Already(status) => Err(Problem::new(
            ProblemCode::FailedPrecondition,
            format!("run {id} has already ended ({status}); there is nothing to cancel"),
        )),
        Ended::Unknown => Err(no_run(&id)),
    }
}

/// The cancel's `202` answer: `cancelling` when the bridge was asked to, `cancelled` when
/// callbackd ended the run itself.
fn cancelling(id: &str, status: &str) -> Response {
    (
        StatusCode::ACCEPTED,
        [(http::header::CONTENT_TYPE, "application/json")],
        json!({"run_id": id, "status": status}).to_string(),
    )
        .into_response()
}

/// Whether the bridge's answer to CancelRun says it does not know the run: a bridge that
/// started after the run's own (it takes the id for a cloud agent's, `invalid_argument …
/// bc-<uuid>`), or one that never had its session.
fn bridge_does_not_know(e: &crate::connect::client::ClientError) -> bool {
    let m = e.message().to_ascii_lowercase();
    matches!(e.code(), "invalid_argument" | "not_found")
        || m.contains("unknown agent")
        || m.contains("not found")
        || m.contains("bc-<uuid>")
}

/// `POST /v1/runs/{run_id}/stream-token`: a short-lived, read-only credential for this run's
/// stream, for a browser's `EventSource` (which cannot send headers).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct StreamToken {
    /// Send it as `GET /v1/runs/{run_id}/stream?access_token=<token>`; nothing else takes it.
    pub token: String,
    /// When it stops opening streams (RFC 3339 UTC); a stream already open is not cut.
    pub expires_at: String,
}

pub async fn stream_token(
    State(state): State<ApiState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    run_doc(&state, &caller.ns, &id).await?;
    let ttl = i64::try_from(state.config().stream_token_ttl_ms).unwrap_or(i64::MAX / 2);
    let expires = crate::clock::now_ms().saturating_add(ttl);
    let token = super::stream_token::issue(caller.grant_digest(), &caller.ns, &id, expires);
    Ok(json_response(
        StatusCode::OK,
        &StreamToken {
            token,
            expires_at: rfc3339_ms(expires),
        },
    ))
}
