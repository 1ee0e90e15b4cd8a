//! `POST /v1/sessions/{session_id}/messages`: starts a turn with the bridge's `Send` and
//! answers with the new run's stream. Durable events come from the store (the bridge
//! commits each through callbackd before it streams it); only the `token` events come from
//! the `Send` stream (run-api.md §3):
//! - a `Send` message with no known case (the bridge's keepalive) is ignored;
//! - a transport error on `Send` means "the run may still be executing": the stream keeps
//!   following the store until the run is terminal;
//! - the client going away does not cancel the run;
//! - "already has active run" right after a turn ended is the previous turn settling: the
//!   `Send` is retried for `api.send_settle_ms`; a run that is really active is a 409;
//! - "Unknown agent" after a bridge restart: `ResumeAgent` with the session's tools, then
//!   `Send` again.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;
use tokio::time::Instant;

use super::bridge::bridge_problem;
use super::problem::{Problem, ProblemCode};
use super::reader::{is_terminal, Reader};
use super::sessions::{declarations, no_session};
use super::{runs, ApiJson, ApiState, Caller};
use crate::bridge::BridgeClient;
use crate::connect::client::{ClientError, MessageStream};

/// `POST .../messages` body.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct NewMessage {
    /// The user's message (not blank).
    #[schemars(with = "String", regex(pattern = r"\S"))]
    pub text: Option<String>,
}

pub async fn send(
    State(state): State<ApiState>,
    caller: Caller,
    Path(session): Path<String>,
    conn: Option<axum::Extension<crate::server::ConnSlot>>,
    ApiJson(body): ApiJson<NewMessage>,
) -> Result<Response, Problem> {
    caller.require_write("send messages")?;
    if state.stopping() {
        return Err(Problem::new(
            ProblemCode::Unavailable,
            "callbackd is stopping: no new turn starts; send the message again once it is back",
        ));
    }
    let text = match body.text {
        Some(t) if !t.trim().is_empty() => t,
        Some(_) => return Err(Problem::invalid("text is empty: send the user's message")),
        None => return Err(Problem::invalid("text is required: {\"text\": \"...\"}")),
    };
    let reader = state.reader(&caller.ns);
    let agent = reader
        .agent(&session)
        .await?
        .ok_or_else(|| no_session(&session))?;
    let (run_id, doc, relay) = begin(&state, &reader, &session, &agent, &text).await?;
    runs::open(
        &state,
        caller,
        run_id,
        doc,
        0,
        Some(relay),
        conn.map(|c| c.0),
    )
    .await
}

/// Starts a turn of `session` with the user's `text`: sends it to the bridge, records it as
/// the run's input, relays the `Send` stream's text deltas, and waits for the run's document.
/// The new run's id, its document and the relay of its tokens (`POST .../messages` and
/// `POST /v1/ag-ui` alike).
pub(super) async fn begin(
    state: &ApiState,
    reader: &Reader<'_>,
    session: &str,
    agent: &Value,
    text: &str,
) -> Result<(String, Value, super::live_tokens::Relay), Problem> {
    let bridge = state.bridge(reader.ns).get()?;
    // Until the text is recorded, an early reader's `run_started` waits for it.
    let mark = state.sending().begin(reader.ns, session);
    let (mut stream, run_id, early) =
        start_turn(state, &bridge, reader, session, agent, text).await?;
    // Kept beside the run before its stream is opened here: `run_started.input`.
    state
        .records()
        .set_run_input(reader.ns, &run_id, text)
        .await?;
    drop(mark);
    let (relay, intake) = state.live_tokens().relay(reader.ns, &run_id);
    for t in early {
        intake.push(t);
    }
    // The rest of the Send stream, for its text deltas. It ends with the run (or a transport
    // error, after which the stream still follows the store); it never cancels the run.
    tokio::spawn(async move {
        loop {
            match stream.next().await {
                Ok(Some(msg)) => {
                    if let Some(t) = text_delta(&msg) {
                        // Read to its end even when the client's stream is gone: dropping
                        // the Send stream early is not how a run is cancelled.
                        intake.push(t);
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    tracing::debug!(error = %e, "the bridge's Send stream ended with an error");
                    return;
                }
            }
        }
    });
    let doc = super::new_run::new_run_doc(state.store().as_ref(), reader, &run_id).await?;
    Ok((run_id, doc, relay))
}

/// A text delta of a `Send` message, if it is one.
fn text_delta(msg: &Value) -> Option<String> {
    let update = msg.get("interactionUpdate")?.get("update")?;
    (update.get("type")?.as_str()? == "text-delta")
        .then(|| {
            update
                .get("text")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .flatten()
}

/// The run id a `Send` message names, if any.
fn run_id_of(msg: &Value) -> Option<String> {
    let id = msg
        .pointer("/sdkMessage/message/run_id")
        .or_else(|| msg.pointer("/result/runId"))
        .or_else(|| msg.pointer("/done/runId"))?;
    id.as_str().map(str::to_string)
}

/// Sends the message (resuming the agent or waiting for the previous turn to settle as
/// needed); returns the `Send` stream, the new run's id, and text deltas seen before it.
async fn start_turn(
    state: &ApiState,
    bridge: &BridgeClient,
    reader: &Reader<'_>,
    session: &str,
    agent: &Value,
    text: &str,
) -> Result<(MessageStream, String, Vec<String>), Problem> {
    let settle_until = Instant::now() + Duration::from_millis(state.config().send_settle_ms);
    let mut resumed = false;
    loop {
        let attempt = match bridge.send(session, text).await {
            Ok(mut stream) => first_run_id(&mut stream)
                .await
                .map(|(id, early)| (stream, id, early)),
            Err(e) => Err(e),
        };
        let e = match attempt {
            Ok(ok) => return Ok(ok),
            Err(e) => e,
        };
        let message = e.message();
        if !resumed && is_unknown_agent(&e) {
            resumed = true;
            resume(state, bridge, reader, session, agent).await?;
            continue;
        }
        if message.contains("already has active run") || message.contains("active run") {
            let active = reader.agent(session).await?.and_then(|a| {
                a.get("activeRunId")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
            let settling = match &active {
                None => true,
                Some(run) => {
                    reader.run(run).await?.is_none_or(|d| is_terminal(&d))
                        || runs::stored_end(
                            state,
                            reader.ns,
                            run,
                            state.records().run_positions(reader.ns, run).await?,
                        )
                        .await?
                        .is_some()
                }
            };
            if settling && Instant::now() < settle_until {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            return Err(Problem::new(
                ProblemCode::FailedPrecondition,
                format!(
                    "session {session} has an active run{}: wait for it to end (follow GET \
                     /v1/runs/{{run_id}}/stream) or cancel it (POST /v1/runs/{{run_id}}/cancel); \
                     the bridge said: {message}",
                    active.map(|r| format!(" {r}")).unwrap_or_default()
                ),
            ));
        }
        return Err(bridge_problem("Send", &e));
    }
}

fn is_unknown_agent(e: &ClientError) -> bool {
    let m = e.message().to_ascii_lowercase();
    m.contains("unknown agent") || (e.code() == "not_found" && m.contains("agent"))
}

/// Declares the session's agent to the bridge again (`ResumeAgent`): its registry tools
/// and the frontend tools an AG-UI app declared for it. The bridge replaces an agent it
/// already holds with the resumed one, so this also changes the tools of a live agent.
pub(super) async fn resume(
    state: &ApiState,
    bridge: &BridgeClient,
    reader: &Reader<'_>,
    session: &str,
    agent: &Value,
) -> Result<(), Problem> {
    // A fork without runs of its own: its model and tools are those kept with the fork (this
    // daemon may not be the one that made it, or may have restarted since).
    let fork = state
        .store()
        .clone()
        .fork_records()
        .fork_of(reader.ns, session)
        .await?;
    let names = state
        .tools_of(reader.ns, session)
        .or_else(|| fork.as_ref().map(|f| f.tools.clone()));
    let (mut tools, _) = match declarations(state, reader.ns, names.as_deref()) {
        Ok(d) => d,
        // A tool the session had is gone from the config: declare what is there.
        Err(_) => declarations(state, reader.ns, None)?,
    };
    if let Value::Object(tools) = &mut tools {
        tools.extend(state.tools().frontend().declared(reader.ns, session));
    }
    let cwd = agent
        .get("cwd")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| bridge.default_cwd.clone())
        .unwrap_or_default();
    let model = reader
        .latest_model(session)
        .await?
        .or_else(|| fork.map(|f| f.model).filter(|m| !m.is_empty()))
        .unwrap_or_else(|| bridge.default_model.clone());
    bridge
        .resume_agent(session, &model, &cwd, &tools)
        .await
        .map_err(|e| bridge_problem("ResumeAgent", &e))?;
    tracing::info!(session, "resumed the agent on the bridge before sending");
    Ok(())
}

/// Reads `Send` messages until one names the run; text deltas before it are kept.
async fn first_run_id(stream: &mut MessageStream) -> Result<(String, Vec<String>), ClientError> {
    let mut early = Vec::new();
    loop {
        match stream.next().await? {
            Some(msg) => {
                if let Some(id) = run_id_of(&msg) {
                    return Ok((id, early));
                }
                if let Some(t) = text_delta(&msg) {
                    early.push(t);
                }
            }
            None => {
                return Err(ClientError::Protocol {
                    url: "the bridge".into(),
                    reason: "Send ended before naming its run".into(),
                })
            }
        }
    }
}
