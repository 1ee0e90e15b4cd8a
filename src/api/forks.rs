//! `GET /v1/sessions/{session_id}/forks` and `GET /v1/runs/{run_id}/forks`: the sessions
//! made from a session, or from one of its runs (a retry is a fork `before` its run, so it
//! is listed too). What the console shows beside a run ("forked 2×") and how a client finds
//! the branches of a conversation. The note each fork keeps ([`ForkRecord`]) is the source
//! of truth: a fork that is deleted takes its note with it and is no longer listed.

use axum::extract::{Path, State};
use axum::response::Response;
use http::StatusCode;
use serde::Serialize;
use serde_json::Value;

use super::problem::Problem;
use super::reader::ForkedFrom;
use super::sessions::no_session;
use super::{json_response, ApiState, Caller};
use crate::clock::rfc3339_ms;
use crate::store::forks::ForkRecord;
use crate::store::Namespace;

/// A session forked from another.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ForkSummary {
    /// The fork's own session id.
    pub session_id: String,
    pub forked_from: ForkedFrom,
    /// The model the fork was made with (its source's).
    pub model: String,
    /// The fork's name as it is now (renamed or not), so a list tells forks apart.
    pub name: Option<String>,
    /// A retry: a fork `before` its run whose first message is that run's message again
    /// (`POST /v1/runs/{run_id}/retry`, or a fork before the run sent the same text). Read from
    /// the messages this store kept, so a run not started through the run API never counts.
    pub retry: bool,
    pub created_at: String,
}

/// The forks of a session or of a run, oldest first.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ForkList {
    pub forks: Vec<ForkSummary>,
}

/// The forks of `records`, each with its current name and whether it is a retry (a few
/// indexed reads per fork; a list holds the forks of one session or run).
async fn list(
    state: &ApiState,
    ns: &Namespace,
    records: Vec<ForkRecord>,
) -> Result<ForkList, Problem> {
    let reader = state.reader(ns);
    let mut forks = Vec::with_capacity(records.len());
    for r in records {
        let name = reader
            .agent(&r.agent_id)
            .await?
            .and_then(|doc| doc.get("name").and_then(Value::as_str).map(str::to_string));
        let retry = r.at == "before" && is_retry(state, ns, &reader, &r).await?;
        forks.push(ForkSummary {
            forked_from: ForkedFrom::of(&r),
            created_at: rfc3339_ms(r.created_at_ms),
            session_id: r.agent_id,
            model: r.model,
            name,
            retry,
        });
    }
    Ok(ForkList { forks })
}

/// Whether the fork's first run was asked what its source run was asked.
async fn is_retry(
    state: &ApiState,
    ns: &Namespace,
    reader: &super::reader::Reader<'_>,
    fork: &ForkRecord,
) -> Result<bool, Problem> {
    let first = reader.runs_of(&fork.agent_id, 1, None).await?;
    let Some(first) = first
        .items
        .first()
        .and_then(|d| d.get("runId"))
        .and_then(Value::as_str)
    else {
        return Ok(false);
    };
    let ids = [first.to_string(), fork.source_run_id.clone()];
    let inputs = state.records().run_inputs(ns, &ids).await?;
    Ok(matches!((inputs.get(&ids[0]), inputs.get(&ids[1])), (Some(a), Some(b)) if a == b))
}

pub async fn of_session(
    State(state): State<ApiState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let reader = state.reader(&caller.ns);
    reader.agent(&id).await?.ok_or_else(|| no_session(&id))?;
    let forks = state
        .store()
        .clone()
        .fork_records()
        .forks_from(&caller.ns, &id)
        .await?;
    Ok(json_response(
        StatusCode::OK,
        &list(&state, &caller.ns, forks).await?,
    ))
}

pub async fn of_run(
    State(state): State<ApiState>,
    caller: Caller,
    Path(run_id): Path<String>,
) -> Result<Response, Problem> {
    let reader = state.reader(&caller.ns);
    let run = reader.run(&run_id).await?.ok_or_else(|| {
        Problem::not_found(format!(
            "no run {run_id:?} (GET /v1/sessions/{{session_id}}/runs lists a session's runs)"
        ))
    })?;
    let session = run.get("agentId").and_then(Value::as_str).unwrap_or("");
    let mut forks = state
        .store()
        .clone()
        .fork_records()
        .forks_from(&caller.ns, session)
        .await?;
    forks.retain(|f| f.source_run_id == run_id);
    Ok(json_response(
        StatusCode::OK,
        &list(&state, &caller.ns, forks).await?,
    ))
}
