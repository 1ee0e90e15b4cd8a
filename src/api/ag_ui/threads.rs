//! A thread is a session. An unknown thread id starts one (the model from
//! `forwardedProps.model`, else the bridge's default; every enabled tool the namespace may
//! call, as `POST /v1/sessions` declares them), and the thread id is kept as an alias of the
//! session's id (`ag_ui_threads`), so `GET /v1/sessions/{threadId}` answers it and later
//! inputs on the thread are turns of it. A thread id that is a session's own id is that
//! session (an AG-UI client can continue a session made elsewhere).

use serde_json::{Map, Value};

use super::super::bridge::bridge_problem;
use super::super::problem::Problem;
use super::super::sessions::declarations;
use super::super::ApiState;
use crate::clock::now_ms;
use crate::store::Namespace;

/// The session `thread` is, if it is one: an alias first, else a session with that id.
pub async fn session_of(
    state: &ApiState,
    ns: &Namespace,
    thread: &str,
) -> Result<Option<String>, Problem> {
    if let Some(session) = state
        .store()
        .clone()
        .thread_records()
        .thread_session(ns, thread)
        .await?
    {
        return Ok(Some(session));
    }
    Ok(state
        .reader(ns)
        .agent(thread)
        .await?
        .map(|_| thread.to_string()))
}

/// Starts the thread's session on the bridge (with the turn's frontend tools) and records
/// the alias; the session's id (the first one recorded, when two first inputs of a thread
/// raced).
pub async fn start(
    state: &ApiState,
    ns: &Namespace,
    thread: &str,
    model: Option<String>,
    frontend: &Map<String, Value>,
) -> Result<String, Problem> {
    let bridge = state.bridge(ns).get()?;
    let (mut tools, names) = declarations(state, ns, None)?;
    if let Value::Object(tools) = &mut tools {
        tools.extend(frontend.clone());
    }
    let model = model.unwrap_or_else(|| bridge.default_model.clone());
    let cwd = bridge.default_cwd.clone().ok_or_else(|| {
        Problem::invalid(
            "the bridge did not say its workspace ([bridge] default_cwd), so a thread cannot \
             start a session: set it, or create the session with POST /v1/sessions {cwd} and \
             use its id as the threadId",
        )
    })?;
    let id = bridge
        .create_agent(&model, &cwd, &tools)
        .await
        .map_err(|e| bridge_problem("CreateAgent", &e))?;
    state.remember_tools(ns, &id, names);
    state.tools().frontend().declare(ns, &id, frontend.clone());
    let session = state
        .store()
        .clone()
        .thread_records()
        .claim_thread(ns, thread, &id, now_ms())
        .await?;
    if session != id {
        tracing::info!(
            thread,
            session,
            unused = id,
            "another input started this thread first"
        );
    }
    Ok(session)
}

/// The session document of `session`, or a problem: the thread's session was deleted.
pub async fn agent(
    state: &ApiState,
    ns: &Namespace,
    thread: &str,
    session: &str,
) -> Result<Value, Problem> {
    state.reader(ns).agent(session).await?.ok_or_else(|| {
        Problem::not_found(format!(
            "thread {thread:?} was session {session}, which is gone (deleted): start a new thread"
        ))
    })
}
