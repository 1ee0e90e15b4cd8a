//! Frontend tools: the input's `tools` are declared to the thread's Cursor agent for the
//! turn as custom tools callbackd holds (`tools::frontend`). A call of one ends the AG-UI
//! run with `outcome: {type: "success", pendingToolCallIds}` while the Cursor run waits
//! (`stream`); the next input's `tool` messages are the calls' results, returned to the
//! bridge, and that response streams the continuation of the same Cursor run.
//!
//! The bridge takes new tools for an agent it already holds through `ResumeAgent` (it
//! replaces its agent object with the resumed one), so a turn whose tools differ from the
//! agent's declares them again before it is sent; a turn without tools withdraws them.

use serde_json::{json, Map, Value};

use super::super::problem::{Problem, ProblemCode};
use super::super::ApiState;
use super::input::FrontendTool;
use crate::store::Namespace;

/// The `customTools` declarations of the input's tools, or `400` naming a tool whose name
/// the bridge would refuse, is given twice, or is a tool callbackd serves itself.
pub fn declarations(
    state: &ApiState,
    ns: &Namespace,
    tools: &[FrontendTool],
) -> Result<Map<String, Value>, Problem> {
    let registry = state.tools().registry();
    let mut out = Map::new();
    for (i, t) in tools.iter().enumerate() {
        let valid = (1..=64).contains(&t.name.len())
            && t.name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            return Err(Problem::invalid(format!(
                "tools[{i}].name {:?} is not a tool name: 1 to 64 letters, digits, '_' or '-'",
                t.name
            )));
        }
        if registry.get(&t.name).is_some() && state.namespaces().allows_tool(ns, &t.name) {
            return Err(Problem::invalid(format!(
                "tools[{i}].name {:?} is a tool callbackd serves itself: give the frontend \
                 tool another name",
                t.name
            )));
        }
        let mut decl = json!({ "inputSchema": t.parameters });
        if !t.description.is_empty() {
            decl["description"] = json!(t.description);
        }
        if out.insert(t.name.clone(), decl).is_some() {
            return Err(Problem::invalid(format!(
                "tools[{i}].name {:?} is declared twice",
                t.name
            )));
        }
    }
    Ok(out)
}

/// Makes `tools` the session's frontend tools for its next turn: declared to the bridge
/// again (`ResumeAgent`) when they differ from the agent's.
pub async fn declare(
    state: &ApiState,
    ns: &Namespace,
    session: &str,
    agent: &Value,
    tools: Map<String, Value>,
) -> Result<(), Problem> {
    let calls = state.tools().frontend();
    if calls.declared(ns, session) == tools {
        return Ok(());
    }
    let bridge = state.bridge(ns).get()?;
    let before = calls.declare(ns, session, tools);
    let reader = state.reader(ns);
    if let Err(p) = super::super::messages::resume(state, &bridge, &reader, session, agent).await {
        calls.declare(ns, session, before);
        return Err(p);
    }
    Ok(())
}

/// Returns the `tool` messages' contents to the held calls; the Cursor run they belong to.
/// Every result must answer a call of the thread's agent that waits, else `409` naming it
/// (and none is returned).
pub fn answer(
    state: &ApiState,
    ns: &Namespace,
    session: Option<&str>,
    results: Vec<(String, String)>,
) -> Result<String, Problem> {
    let calls = state.tools().frontend();
    let conflict = |detail: String| {
        let mut p = Problem::new(ProblemCode::FailedPrecondition, detail);
        p.status = http::StatusCode::CONFLICT.as_u16();
        p
    };
    let Some(session) = session else {
        return Err(conflict(format!(
            "no frontend tool call of this thread waits for a result (tool message for {}): \
             the thread has no session",
            results[0].0
        )));
    };
    let mut run = None;
    for (id, _) in &results {
        let Some(call) = calls.waits(ns, session, id) else {
            return Err(conflict(format!(
                "no frontend tool call {id:?} of this thread waits for a result: it was never \
                 made, was answered already, or its wait timed out (the model was told)"
            )));
        };
        run = run.or(call.run_id);
    }
    let run = match run {
        Some(run) => run,
        None => {
            return Err(Problem::internal(format!(
                "the frontend tool call {} has no run in the store",
                results[0].0
            )))
        }
    };
    for (id, content) in results {
        calls
            .answer(ns, session, &id, content)
            .map_err(|e| conflict(e.to_string()))?;
    }
    Ok(run)
}

/// `409` for a new user message while a frontend call of the thread waits, naming it.
pub fn waiting(state: &ApiState, ns: &Namespace, session: &str) -> Result<(), Problem> {
    let owed = state.tools().frontend().pending_of(ns, session);
    if owed.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = owed
        .iter()
        .map(|c| format!("{} ({})", c.tool_call_id, c.tool))
        .collect();
    let mut p = Problem::new(
        ProblemCode::FailedPrecondition,
        format!(
            "the thread's run waits for the result of frontend tool call {}: send it as a tool \
             message (toolCallId, content) before a new user message",
            names.join(", ")
        ),
    );
    p.status = http::StatusCode::CONFLICT.as_u16();
    Err(p)
}
