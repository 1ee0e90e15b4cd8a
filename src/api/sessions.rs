//! `/v1/sessions`: create (on the bridge), list and get (from the store).

use axum::extract::{Path, State};
use axum::response::Response;
use http::{StatusCode, Uri};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::bridge::bridge_problem;
use super::problem::Problem;
pub use super::reader::no_session;
use super::reader::{Listed, RunSummary, Session};
use super::{json_response, limit, query, ApiJson, ApiState, Caller};

/// `POST /v1/sessions` body.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewSession {
    /// The model id; default `[bridge] default_model`.
    pub model: Option<String>,
    /// The agent's workspace; default the bridge's own workspace.
    pub cwd: Option<String>,
    /// Registry tools to declare; default every enabled tool.
    pub tools: Option<Vec<String>>,
    /// 1 to 200 characters (as `PATCH`); shown in lists and searched by `q`. Default: the
    /// bridge's own ("New Agent").
    #[schemars(with = "Option<String>", length(min = 1, max = 200))]
    pub name: Option<Value>,
}

/// `201` answer of `POST /v1/sessions`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Created {
    pub session: Session,
    pub tools: Vec<String>,
}

/// A page of sessions.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct SessionPage {
    pub sessions: Vec<Session>,
    pub next_cursor: Option<String>,
}

/// A page of runs.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct RunPage {
    pub runs: Vec<RunSummary>,
    pub next_cursor: Option<String>,
}

/// The customTools declarations of `names` (all enabled tools `ns` may call when `None`),
/// or 400 naming an unknown one (a tool outside the namespace's allowlist is unknown to it).
pub fn declarations(
    state: &ApiState,
    ns: &crate::store::Namespace,
    names: Option<&[String]>,
) -> Result<(Value, Vec<String>), Problem> {
    let registry = state.tools().registry();
    let all = registry.declarations();
    let Value::Object(mut all) = all else {
        return Ok((Value::Object(Map::new()), vec![]));
    };
    let namespaces = state.namespaces();
    all.retain(|name, _| namespaces.allows_tool(ns, name));
    let names: Vec<String> = match names {
        None => all.keys().cloned().collect(),
        Some(names) => names.to_vec(),
    };
    let mut out = Map::new();
    for name in &names {
        match all.get(name) {
            Some(decl) => {
                out.insert(name.clone(), decl.clone());
            }
            None => {
                let served: Vec<&str> = registry
                    .names()
                    .filter(|t| namespaces.allows_tool(ns, t))
                    .collect();
                return Err(Problem::invalid(format!(
                    "unknown tool {name:?} in tools: this daemon serves {}",
                    if served.is_empty() {
                        "no tools".into()
                    } else {
                        served.join(", ")
                    }
                )));
            }
        }
    }
    Ok((Value::Object(out), names))
}

/// A session's workspace must be a directory the (local) bridge can work in: refused here
/// with its name, rather than accepted and failing later inside the bridge.
fn check_cwd(cwd: &str) -> Result<(), Problem> {
    let path = std::path::Path::new(cwd);
    if !path.is_absolute() {
        return Err(Problem::invalid(format!(
            "cwd {cwd:?} is not an absolute path"
        )));
    }
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(Problem::invalid(format!("cwd {cwd:?} is not a directory"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(Problem::invalid(format!("cwd {cwd:?} does not exist")))
        }
        Err(e) => Err(Problem::invalid(format!("cwd {cwd:?} cannot be read: {e}"))),
    }
}

pub async fn create(
    State(state): State<ApiState>,
    caller: Caller,
    ApiJson(body): ApiJson<NewSession>,
) -> Result<Response, Problem> {
    caller.require_write("create sessions")?;
    // Checked before anything is created: a bad name creates no session.
    let name = body
        .name
        .as_ref()
        .map(super::session_admin::checked_name)
        .transpose()?;
    let bridge = state.bridge(&caller.ns).get()?;
    let (tools, names) = declarations(&state, &caller.ns, body.tools.as_deref())?;
    let model = body.model.unwrap_or_else(|| bridge.default_model.clone());
    if let Some(cwd) = &body.cwd {
        check_cwd(cwd)?;
    }
    let cwd = match body.cwd.or_else(|| bridge.default_cwd.clone()) {
        Some(cwd) => cwd,
        None => {
            return Err(Problem::invalid(
                "cwd is required: the bridge did not say its workspace ([bridge] default_cwd)",
            ))
        }
    };
    let id = bridge
        .create_agent(&model, &cwd, &tools)
        .await
        .map_err(|e| bridge_problem("CreateAgent", &e))?;
    state.remember_tools(&caller.ns, &id, names.clone());
    let reader = state.reader(&caller.ns);
    let mut doc = reader.agent(&id).await?.ok_or_else(|| {
        Problem::internal(format!(
            "the bridge created agent {id} but it is not in this daemon's store: is the bridge \
             using callbackd as its store (--local-store '{{\"type\":\"custom\"}}')?"
        ))
    })?;
    if let Some(name) = name {
        doc = super::session_admin::rename(&state, &caller, &id, name).await?;
    }
    Ok(json_response(
        StatusCode::CREATED,
        &Created {
            session: Session::from_doc(&doc, Some(model)),
            tools: names,
        },
    ))
}

pub async fn list(
    State(state): State<ApiState>,
    caller: Caller,
    uri: Uri,
) -> Result<Response, Problem> {
    let q = query(&uri)?;
    let limit = limit(q.get("limit").map(String::as_str), 50)?;
    let reader = state.reader(&caller.ns);
    let page = reader
        .agents(
            limit,
            q.get("cursor")
                .map(String::as_str)
                .filter(|c| !c.is_empty()),
        )
        .await?;
    session_page(&state, &caller.ns, page).await
}

/// A page of agent documents as the API's `SessionPage`, each as [`shown`] (the sessions
/// list and its search answer alike).
pub(super) async fn session_page(
    state: &ApiState,
    ns: &crate::store::Namespace,
    page: Listed,
) -> Result<Response, Problem> {
    let mut sessions = Vec::with_capacity(page.items.len());
    for doc in &page.items {
        sessions.push(shown(state, ns, doc).await?);
    }
    Ok(json_response(
        StatusCode::OK,
        &SessionPage {
            sessions,
            next_cursor: page.next_cursor,
        },
    ))
}

/// A session as the API shows it, in a list as on its own: the model it really uses (its
/// latest run's; a fork without runs of its own has its source's) and where it was forked
/// from.
async fn shown(
    state: &ApiState,
    ns: &crate::store::Namespace,
    doc: &Value,
) -> Result<Session, Problem> {
    let id = doc
        .get("agentId")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let fork = state.store().clone().fork_records().fork_of(ns, id).await?;
    let model = match state.reader(ns).latest_model(id).await? {
        Some(m) => Some(m),
        None => fork
            .as_ref()
            .map(|f| f.model.clone())
            .filter(|m| !m.is_empty()),
    };
    let mut session = Session::from_doc(doc, model);
    session.forked_from = fork.as_ref().map(super::reader::ForkedFrom::of);
    Ok(session)
}

pub async fn get_one(
    State(state): State<ApiState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let reader = state.reader(&caller.ns);
    // An AG-UI thread id answers as the session it started.
    let id = match reader.agent(&id).await? {
        Some(_) => id,
        None => state
            .store()
            .clone()
            .thread_records()
            .thread_session(&caller.ns, &id)
            .await?
            .unwrap_or(id),
    };
    let doc = reader.agent(&id).await?.ok_or_else(|| no_session(&id))?;
    Ok(json_response(
        StatusCode::OK,
        &shown(&state, &caller.ns, &doc).await?,
    ))
}

pub async fn runs(
    State(state): State<ApiState>,
    caller: Caller,
    Path(id): Path<String>,
    uri: Uri,
) -> Result<Response, Problem> {
    let q = query(&uri)?;
    let limit = limit(q.get("limit").map(String::as_str), 50)?;
    let reader = state.reader(&caller.ns);
    reader.agent(&id).await?.ok_or_else(|| no_session(&id))?;
    let page = reader
        .runs_of(
            &id,
            limit,
            q.get("cursor")
                .map(String::as_str)
                .filter(|c| !c.is_empty()),
        )
        .await?;
    run_page(&state, &caller.ns, page).await
}

/// A page of run documents as the API's `RunPage`, each run's summary with the start of its
/// input (a list shows the start of each input; the run's own state has it whole): a
/// session's runs and the runs search alike.
pub(super) async fn run_page(
    state: &ApiState,
    ns: &crate::store::Namespace,
    page: Listed,
) -> Result<Response, Problem> {
    let run_id = |doc: &Value| {
        doc.get("runId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    // The page's input texts, positions and last events in one store call each, not one
    // per run.
    let ids: Vec<String> = page.items.iter().map(run_id).collect();
    let mut inputs = state.records().run_inputs(ns, &ids).await?;
    let positions = state.records().runs_positions(ns, &ids).await?;
    let mut lasts = state.records().last_events(ns, &ids).await?;
    let mut runs = Vec::with_capacity(page.items.len());
    for (doc, id) in page.items.iter().zip(&ids) {
        let pos = positions.get(id).copied().unwrap_or_default();
        let input = inputs.remove(id);
        // As `runs::summary` reads it: the event at the run's last seq, if still stored (an
        // append between the two reads leaves it out, as it would a moment earlier).
        let last = match lasts.remove(id) {
            Some(doc) if super::runs::has_last(pos) => {
                Some(crate::account::stored_event_of(&doc)?).filter(|ev| ev.seq == pos.last_seq)
            }
            _ => None,
        };
        let mut run = super::runs::summary_of(state, ns, doc, pos, false, input, last).await?;
        run.input = run.input.map(|i| crate::account::RunInput::listed(&i.text));
        runs.push(run);
    }
    Ok(json_response(
        StatusCode::OK,
        &RunPage {
            runs,
            next_cursor: page.next_cursor,
        },
    ))
}

#[cfg(test)]
mod cwd_tests {
    use super::check_cwd;

    #[test]
    fn a_missing_relative_or_file_cwd_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        assert!(check_cwd(dir.path().to_str().unwrap()).is_ok());
        for (cwd, why) in [
            ("/does/not/exist".to_string(), "does not exist"),
            (file.display().to_string(), "is not a directory"),
            ("relative/dir".to_string(), "is not an absolute path"),
        ] {
            let p = check_cwd(&cwd).unwrap_err();
            assert_eq!(p.status, 400);
            assert!(
                p.detail.contains(&cwd) && p.detail.contains(why),
                "{}",
                p.detail
            );
        }
    }
}
