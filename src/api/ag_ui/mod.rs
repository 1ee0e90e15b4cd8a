//! `POST /v1/ag-ui`: the run API in the Agent-User Interaction protocol (AG-UI 1.0), so any
//! AG-UI client (`@ag-ui/client`'s `HttpAgent`, CopilotKit) drives a Cursor agent through
//! callbackd. The body is a `RunAgentInput` ([`input`]); the answer is one AG-UI run as
//! `text/event-stream` in AG-UI's SSE encoding ([`stream`], [`event`], [`mapper`]).
//!
//! A thread is a session ([`threads`]); an input's last user message is a turn of it.
//! A held call ends the AG-UI run with interrupts while the Cursor run keeps it held; the
//! next input's `resume` decides them and streams the continuation of the same Cursor run
//! as a new AG-UI run ([`interrupts`], [`held`]). The input's `tools` are frontend tools:
//! a call of one ends the AG-UI run with `pendingToolCallIds`, and the next input's `tool`
//! messages are its result ([`frontend`]). docs/ag-ui.md has the whole mapping.

mod event;
mod frontend;
mod held;
mod input;
mod interrupts;
mod mapper;
mod stream;
mod threads;

pub use held::HeldRuns;
pub use input::InputDoc;

use axum::extract::State;
use axum::response::Response;
use serde_json::Value;

use super::problem::Problem;
use super::{ApiJson, ApiState, Caller};
use input::{Ask, RunAgentInput};
use mapper::AgUiMapper;

/// `POST /v1/ag-ui`.
pub async fn run(
    State(state): State<ApiState>,
    caller: Caller,
    conn: Option<axum::Extension<crate::server::ConnSlot>>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Response, Problem> {
    caller.require_write("run agents over AG-UI")?;
    let input = RunAgentInput::parse(&body)?;
    let ask = input.ask()?;
    let model = input.model()?;
    let ns = caller.ns.clone();
    let session = threads::session_of(&state, &ns, &input.thread_id).await?;
    let permit = state.stream_slot(&ns)?;
    let reader = state.reader(&ns);
    let mut answered = std::collections::HashSet::new();
    let (cursor_run, doc, after, opened) = match ask {
        Ask::Resume => {
            let (run, decisions) =
                interrupts::check(&state, &ns, session.as_deref(), &input.resume).await?;
            // Where the interrupted AG-UI run stopped (else: the run's end so far).
            let stopped = match state.ag_ui_held().take(&ns, &run) {
                Some(s) => s,
                None => held::Stopped {
                    pos: state.records().run_positions(&ns, &run).await?.last_seq,
                    opened: Default::default(),
                },
            };
            if let Err(p) = interrupts::decide(&state, &ns, decisions).await {
                state.ag_ui_held().stop(&ns, &run, stopped);
                return Err(p);
            }
            let doc = reader.run(&run).await?.ok_or_else(|| {
                Problem::not_found(format!("the interrupted run {run} is not in the store"))
            })?;
            (run, doc, stopped.pos, stopped.opened)
        }
        Ask::Turn(text) => {
            let tools = frontend::declarations(&state, &ns, &input.tools)?;
            let (session, fresh) = match session {
                Some(session) => {
                    interrupts::waiting(&state, &ns, &session).await?;
                    frontend::waiting(&state, &ns, &session)?;
                    (session, false)
                }
                None => {
                    let session =
                        threads::start(&state, &ns, &input.thread_id, model, &tools).await?;
                    let fresh = state.tools().frontend().declared(&ns, &session) == tools;
                    (session, fresh)
                }
            };
            let agent = threads::agent(&state, &ns, &input.thread_id, &session).await?;
            if !fresh {
                frontend::declare(&state, &ns, &session, &agent, tools).await?;
            }
            let (run, doc, _tokens) =
                super::messages::begin(&state, &reader, &session, &agent, &text).await?;
            (run, doc, 0, Default::default())
        }
        Ask::ToolResults(results) => {
            answered = results.iter().map(|(id, _)| id.clone()).collect();
            let run = frontend::answer(&state, &ns, session.as_deref(), results)?;
            let stopped = match state.ag_ui_held().take(&ns, &run) {
                Some(s) => s,
                None => held::Stopped {
                    pos: state.records().run_positions(&ns, &run).await?.last_seq,
                    opened: Default::default(),
                },
            };
            let doc = reader.run(&run).await?.ok_or_else(|| {
                Problem::not_found(format!("the waiting run {run} is not in the store"))
            })?;
            (run, doc, stopped.pos, stopped.opened)
        }
    };
    let mut mapper = AgUiMapper::new(&input.thread_id, &input.run_id, &cursor_run);
    mapper.opened = opened;
    mapper.answered = answered;
    Ok(stream::respond(
        state,
        stream::Plan {
            ns,
            caller,
            run_doc: doc,
            after,
            mapper,
            permit,
        },
        conn.as_ref().map(|c| &c.0),
    ))
}
