//! `POST /v1/sessions/{session_id}/fork` and `POST /v1/runs/{run_id}/retry`: a new session
//! whose conversation is the source's state after (or before) one of its runs.
//!
//! The bridge keeps a conversation as content-addressed checkpoint blobs; an agent document's
//! `latestCheckpoint.rootBlobId` names the root, and the bridge loads the root and then every
//! blob of the agent (callback-contract.md §2.8). Each run records the root it started from
//! (`startCheckpointRef`) and the one it ended with (`latestCheckpointRef`). A fork is a new
//! agent whose document points at one of those roots and which holds its own copy of the
//! blobs that root reaches: blobs name each other by their raw 32-byte SHA-256, so the
//! blobs reached are those whose id appears in the bytes of a blob already reached, starting
//! from the root. Blobs of later turns are not copied, and nothing of the source is written.
//!
//! Everything is read and checked (every copied blob against its checksum) before the first
//! write; a failed write removes what was written, so a fork either exists whole or not at
//! all. The writes go through the store calls the bridge itself makes, so every backend
//! does the same, and through the namespace's quotas like any new session.

use std::collections::{HashMap, HashSet, VecDeque};

use axum::extract::{Path, State};
use axum::response::Response;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::bridge::bridge_problem;
use super::messages::{self, NewMessage};
use super::problem::{Problem, ProblemCode};
use super::reader::{is_terminal, ForkedFrom, Reader, Session};
use super::sessions::{declarations, no_session};
use super::{json_response, ApiJson, ApiState, Caller};
use crate::store::forks::ForkRecord;
use crate::store::{AgentFilter, CheckpointFilter, Namespace, Page, StoreCall, StoreError};

/// `POST /v1/sessions/{session_id}/fork` body.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewFork {
    /// A finished run of the session.
    pub run_id: String,
    /// `after`: the conversation as that run left it; `before`: as it was when the run
    /// started (before the first run: an empty conversation).
    pub at: String,
    /// The fork's name; default the source's.
    pub name: Option<String>,
}

/// `201` answer of `POST /v1/sessions/{session_id}/fork`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Forked {
    pub session: Session,
    pub tools: Vec<String>,
    /// How many checkpoint blobs the fork got its own copy of.
    pub blobs_copied: usize,
}

/// `POST /v1/runs/{run_id}/retry` body.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Retry {
    /// The message to send instead of the run's own input. Without it, the input kept
    /// when the run was started through `POST /v1/sessions/{session_id}/messages` is sent
    /// again; a run started elsewhere has none kept (`409`).
    pub text: Option<String>,
}

/// What a fork is made of, all read and checked before anything is written.
struct Plan {
    source: Value,
    source_id: String,
    run_id: String,
    at: &'static str,
    root: Option<(Value, String)>,
    blobs: Vec<(String, Vec<u8>)>,
}

fn parse_at(at: &str) -> Result<&'static str, Problem> {
    match at {
        "after" => Ok("after"),
        "before" => Ok("before"),
        other => Err(Problem::invalid(format!(
            "at is {other:?}: fork \"after\" the run (its conversation as the run left it) or \
             \"before\" it (as the run found it)"
        ))),
    }
}

fn conflict(message: String) -> Problem {
    Problem::new(ProblemCode::FailedPrecondition, message)
}

pub async fn fork(
    State(state): State<ApiState>,
    caller: Caller,
    Path(session): Path<String>,
    ApiJson(body): ApiJson<NewFork>,
) -> Result<Response, Problem> {
    caller.require_write("fork sessions")?;
    let at = parse_at(&body.at)?;
    let forked = fork_session(&state, &caller.ns, &session, &body.run_id, at, body.name).await?;
    Ok(json_response(StatusCode::CREATED, &forked))
}

pub async fn retry(
    State(state): State<ApiState>,
    caller: Caller,
    Path(run_id): Path<String>,
    conn: Option<axum::Extension<crate::server::ConnSlot>>,
    ApiJson(body): ApiJson<Retry>,
) -> Result<Response, Problem> {
    caller.require_write("retry runs")?;
    let reader = state.reader(&caller.ns);
    let run = reader.run(&run_id).await?.ok_or_else(|| no_run(&run_id))?;
    let text = match body.text {
        Some(t) if t.trim().is_empty() => {
            return Err(Problem::invalid(
                "text is empty: send the message to retry with",
            ))
        }
        Some(t) => t,
        None => super::prompt::Prompt {
            state: &state,
            ns: &caller.ns,
            run_id: &run_id,
        }
        .known()
        .await
        .ok_or_else(|| {
            conflict(format!(
                "this store does not hold the input of run {run_id} (it was not started \
                     through POST /v1/sessions/{{session_id}}/messages of this store, and no \
                     user message of it is stored): retry it with the message to send \
                     ({{\"text\": \"...\"}})"
            ))
        })?,
    };
    let session = run
        .get("agentId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    // A retry streams a new turn: check the bridge before creating anything.
    state.bridge(&caller.ns).get()?;
    let forked = fork_session(&state, &caller.ns, &session, &run_id, "before", None).await?;
    let id = forked.session.session_id.clone();
    let mut response = messages::send(
        State(state),
        caller,
        Path(id.clone()),
        conn,
        ApiJson(NewMessage { text: Some(text) }),
    )
    .await?;
    if let Ok(v) = http::HeaderValue::from_str(&id) {
        response.headers_mut().insert("callbackd-session-id", v);
    }
    Ok(response)
}

fn no_run(run_id: &str) -> Problem {
    Problem::not_found(format!(
        "no run {run_id:?} (GET /v1/sessions/{{session_id}}/runs lists a session's runs)"
    ))
}

/// Forks `session` at `run_id` (checked, copied, declared to the bridge if one is attached).
async fn fork_session(
    state: &ApiState,
    ns: &Namespace,
    session: &str,
    run_id: &str,
    at: &'static str,
    name: Option<String>,
) -> Result<Forked, Problem> {
    let reader = state.reader(ns);
    settle(state, ns, session, run_id).await?;
    let plan = plan(&reader, session, run_id, at).await?;
    let forks = state.store().clone().fork_records();
    let source_fork = forks.fork_of(ns, session).await?;
    let model = match reader.latest_model(session).await? {
        Some(m) => Some(m),
        None => source_fork.as_ref().map(|f| f.model.clone()),
    }
    .filter(|m| !m.is_empty());
    let bridge = state.bridge(ns).get().ok();
    let model = model
        .or_else(|| bridge.as_ref().map(|b| b.default_model.clone()))
        .unwrap_or_default();
    let names = state
        .tools_of(ns, session)
        .or_else(|| source_fork.map(|f| f.tools));
    let (tools, names) = match declarations(state, ns, names.as_deref()) {
        Ok(d) => d,
        // A tool the source had is gone from the config: declare what is there.
        Err(_) => declarations(state, ns, None)?,
    };

    let id = new_agent_id()?;
    let now = crate::store::event_doc::now_ms();
    let mut doc = plan.source.clone();
    if let Some(obj) = doc.as_object_mut() {
        obj.insert("agentId".into(), json!(id));
        if let Some(name) = name.filter(|n| !n.trim().is_empty()) {
            obj.insert("name".into(), json!(name));
        }
        obj.insert("status".into(), json!("idle"));
        obj.insert("activeRunId".into(), Value::Null);
        obj.insert("createdAt".into(), json!(now));
        obj.insert("updatedAt".into(), json!(now));
        match &plan.root {
            Some((reference, _)) => {
                obj.insert("latestCheckpoint".into(), reference.clone());
            }
            None => {
                obj.remove("latestCheckpoint");
            }
        }
    }
    let create = StoreCall::parse("agents", "create", &json!({ "agent": doc }).to_string())
        .map_err(|e| Problem::internal(format!("the forked agent document: {e}")))?;
    let size = doc.to_string().len() + plan.blobs.iter().map(|(_, d)| d.len()).sum::<usize>();
    let mut admit = create.clone();
    let admitted = state
        .quotas()
        .admit(ns, &mut admit, size)
        .await
        .map_err(write_problem)?;
    let rec = ForkRecord {
        agent_id: id.clone(),
        source_agent_id: plan.source_id.clone(),
        source_run_id: plan.run_id.clone(),
        at: plan.at.to_string(),
        model: model.clone(),
        tools: names.clone(),
        created_at_ms: now,
    };
    if let Err(e) = write(state, ns, create, &plan, rec.clone()).await {
        remove(state, ns, &id).await;
        return Err(e);
    }
    state.quotas().done(admitted);
    state.remember_tools(ns, &id, names.clone());
    if let Some(bridge) = &bridge {
        let cwd = doc
            .get("cwd")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| bridge.default_cwd.clone())
            .unwrap_or_default();
        if let Err(e) = bridge.resume_agent(&id, &model, &cwd, &tools).await {
            remove(state, ns, &id).await;
            return Err(bridge_problem("ResumeAgent", &e));
        }
    }
    tracing::info!(
        source = session,
        run = run_id,
        at,
        fork = id,
        blobs = plan.blobs.len(),
        "forked a session"
    );
    let stored = reader.agent(&id).await?.unwrap_or(doc);
    let mut view = Session::from_doc(&stored, Some(model).filter(|m| !m.is_empty()));
    view.forked_from = Some(ForkedFrom::of(&rec));
    Ok(Forked {
        session: view,
        tools: names,
        blobs_copied: plan.blobs.len(),
    })
}

/// How long a fork waits for the run document of a run whose stream has ended.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(3);

/// Waits (up to [`SETTLE`]) for the document of a run whose terminal event is stored: the
/// bridge writes the event 10-60 ms before the document with the run's final status and
/// checkpoint, and a client that saw the run end (the console's "Fork from here") asks in that
/// window. A run still going (no terminal event) returns at once, for [`plan`] to refuse; a
/// run whose document does not follow its terminal event in time is refused saying so.
async fn settle(
    state: &ApiState,
    ns: &Namespace,
    session: &str,
    run_id: &str,
) -> Result<(), Problem> {
    let reader = state.reader(ns);
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        match reader.run(run_id).await? {
            Some(run)
                if !is_terminal(&run)
                    && run.get("agentId").and_then(Value::as_str) == Some(session) => {}
            // Ended, or not this session's run (which `plan` refuses as unknown).
            _ => return Ok(()),
        }
        let pos = state.records().run_positions(ns, run_id).await?;
        let Some(end) = super::runs::stored_end(state, ns, run_id, pos).await? else {
            return Ok(());
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(conflict(format!(
                "run {run_id}'s stream ended ({end}) but the bridge has not stored its final \
                 document, which names the checkpoint a fork starts from: fork it once the \
                 bridge has written it (GET /v1/runs/{run_id} then shows {end})"
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}

/// Reads the source, the run and the blobs the fork needs; refuses what cannot be forked.
async fn plan(
    reader: &Reader<'_>,
    session: &str,
    run_id: &str,
    at: &'static str,
) -> Result<Plan, Problem> {
    let source = reader
        .agent(session)
        .await?
        .ok_or_else(|| no_session(session))?;
    let run = reader.run(run_id).await?.ok_or_else(|| no_run(run_id))?;
    if run.get("agentId").and_then(Value::as_str) != Some(session) {
        return Err(Problem::not_found(format!(
            "session {session:?} has no run {run_id:?} (GET /v1/sessions/{session}/runs lists \
             its runs)"
        )));
    }
    if !is_terminal(&run) {
        let status = run
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or(crate::run::RunStatus::Queued.as_str());
        return Err(conflict(format!(
            "run {run_id} is {status}: fork a run once it has ended"
        )));
    }
    let key = if at == "after" {
        "latestCheckpointRef"
    } else {
        "startCheckpointRef"
    };
    let root = run
        .get(key)
        .filter(|r| !r.is_null())
        .map(|reference| {
            let id = reference
                .get("rootBlobId")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    Problem::internal(format!("run {run_id}'s {key} names no rootBlobId"))
                })?;
            Ok::<_, Problem>((reference.clone(), id.to_string()))
        })
        .transpose()?;
    let blobs = match &root {
        Some((_, root_id)) => reachable(reader, session, root_id).await?,
        None => Vec::new(),
    };
    Ok(Plan {
        source,
        source_id: session.to_string(),
        run_id: run_id.to_string(),
        at,
        root,
        blobs,
    })
}

/// The root blob and every blob of `agent` it reaches, each checked against its checksum.
async fn reachable(
    reader: &Reader<'_>,
    agent: &str,
    root: &str,
) -> Result<Vec<(String, Vec<u8>)>, Problem> {
    // Every blob id of the agent, by its raw bytes.
    let mut by_bytes: HashMap<[u8; 32], String> = HashMap::new();
    let mut cursor: Option<String> = None;
    loop {
        let filter = CheckpointFilter {
            agent_ids: Some(vec![agent.to_string()]),
            blob_ids: None,
        };
        let page = Page {
            cursor: cursor.clone(),
            limit: 1000,
        };
        let out = reader
            .store
            .call(reader.ns, StoreCall::CheckpointsList(filter, page))
            .await?;
        let v: Value = serde_json::from_str(out.as_deref().unwrap_or("{}"))
            .map_err(|e| Problem::internal(format!("checkpoints.list output: {e}")))?;
        for id in v
            .get("items")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if let Some(raw) = hex32(id) {
                by_bytes.insert(raw, id.to_string());
            }
        }
        match v.get("nextCursor").and_then(Value::as_str) {
            Some(c) if !c.is_empty() => cursor = Some(c.to_string()),
            _ => break,
        }
    }
    let mut out = Vec::new();
    let mut seen = HashSet::from([root.to_string()]);
    let mut queue = VecDeque::from([root.to_string()]);
    while let Some(id) = queue.pop_front() {
        let data = blob(reader, agent, &id).await?;
        for window in data.windows(32) {
            let Ok(key) = <[u8; 32]>::try_from(window) else {
                continue;
            };
            if let Some(next) = by_bytes.get(&key) {
                if seen.insert(next.clone()) {
                    queue.push_back(next.clone());
                }
            }
        }
        out.push((id, data));
    }
    Ok(out)
}

/// One blob, verified; a missing or corrupted one refuses the fork, naming it.
async fn blob(reader: &Reader<'_>, agent: &str, id: &str) -> Result<Vec<u8>, Problem> {
    let call = StoreCall::CheckpointsGet {
        agent_id: agent.to_string(),
        blob_id: id.to_string(),
    };
    let out = match reader.store.call(reader.ns, call).await {
        Ok(out) => out,
        Err(StoreError::DataLoss(m)) => {
            return Err(conflict(format!("cannot fork: {m}; nothing was created")))
        }
        Err(e) => return Err(e.into()),
    };
    let v: Value = serde_json::from_str(out.as_deref().unwrap_or("{}"))
        .map_err(|e| Problem::internal(format!("checkpoints.get output: {e}")))?;
    let data = v
        .get("data")
        .and_then(Value::as_str)
        .filter(|_| v.get("found").and_then(Value::as_bool) == Some(true))
        .ok_or_else(|| {
            conflict(format!(
                "cannot fork: checkpoint blob {id} of session {agent} is missing; nothing was \
                 created"
            ))
        })?;
    STANDARD
        .decode(data)
        .map_err(|e| Problem::internal(format!("checkpoint blob {id}: {e}")))
}

/// The raw bytes of a 64-digit hex blob id.
fn hex32(id: &str) -> Option<[u8; 32]> {
    let bytes = id.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks(2).enumerate() {
        out[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

/// A new agent id, shaped like the bridge's own (a version-4 UUID).
fn new_agent_id() -> Result<String, Problem> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| Problem::internal(format!("no randomness: {e}")))?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    ))
}

async fn write(
    state: &ApiState,
    ns: &Namespace,
    create: StoreCall,
    plan: &Plan,
    rec: ForkRecord,
) -> Result<(), Problem> {
    let store = state.store();
    store.call(ns, create).await.map_err(write_problem)?;
    for (blob_id, data) in &plan.blobs {
        let call = StoreCall::CheckpointsCreate {
            agent_id: rec.agent_id.clone(),
            blob_id: blob_id.clone(),
            data: data.clone(),
        };
        store.call(ns, call).await.map_err(write_problem)?;
    }
    store
        .clone()
        .fork_records()
        .insert_fork(ns, rec)
        .await
        .map_err(write_problem)
}

/// Removes a fork whose writes did not all succeed (its agent takes its blobs and record).
async fn remove(state: &ApiState, ns: &Namespace, id: &str) {
    let call = StoreCall::AgentsDelete(AgentFilter {
        agent_ids: Some(vec![id.to_string()]),
        cwd: None,
    });
    if let Err(e) = state.store().call(ns, call).await {
        tracing::error!(fork = id, error = %e, "removing a fork that failed left rows behind");
    }
}

fn write_problem(e: StoreError) -> Problem {
    match e {
        StoreError::Quota(m) | StoreError::Full(m) => {
            Problem::new(ProblemCode::ResourceExhausted, m)
        }
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_ids_are_read_as_their_raw_bytes() {
        let id = "00ff10".repeat(10) + "abcd";
        let raw = hex32(&id).unwrap();
        assert_eq!(raw[0..3], [0x00, 0xff, 0x10]);
        assert_eq!(raw[30..32], [0xab, 0xcd]);
        assert!(hex32("abc").is_none());
        assert!(hex32(&"g".repeat(64)).is_none());
    }

    #[test]
    fn agent_ids_are_uuids() {
        let id = new_agent_id().unwrap();
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");
        assert_ne!(id, new_agent_id().unwrap());
    }
}
