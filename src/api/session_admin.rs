//! `PATCH /v1/sessions/{id}` (name a session) and `DELETE /v1/sessions/{id}`.
//!
//! A name is the agent document's own `name` (what the bridge's `ListAgents` shows too): the
//! SDK re-reads the stored document before each of its updates and spreads it, so a name set
//! here survives the session's later turns. The rename replaces only that key and keeps the
//! other keys' bytes and order.
//!
//! Deleting goes through the bridge when one is attached, in two calls, because cursor-sdk
//! 1.1.0's `DeleteAgent` removes the agent's rows from the store (through callbackd's store
//! callback) but leaves the live agent in the bridge's registry, holding its resources, where
//! a later `Send` still finds it and fails inside the SDK (`internal` "Agent … not found",
//! measured with the e2e test): `CloseAgent` first (the bridge disposes of the agent and
//! forgets it; a `Send` is then `not_found` "Unknown agent"), then `DeleteAgent`. A session never messaged still has its queued
//! first run as its active run, which `DeleteAgent` refuses ("active run … is not
//! terminal"); that run never started, so callbackd deletes such a session with the store's
//! own cascade (as it does every session when no bridge is attached).

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde::de::{MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::bridge::bridge_problem;
use super::problem::{Problem, ProblemCode};
use super::reader::{is_terminal, no_session, Session};
use super::{json_response, ApiState, Caller};
use crate::connect::client::ClientError;
use crate::store::{AgentFilter, StoreCall};

/// The longest name a session takes, in characters.
pub const MAX_NAME_CHARS: usize = 200;

/// `PATCH /v1/sessions/{session_id}` body.
#[derive(Debug, schemars::JsonSchema)]
#[allow(dead_code)]
pub struct SessionPatch {
    /// 1 to 200 characters; shown in lists and searched by `q`.
    pub name: String,
}

/// The `name` of a PATCH body, or 400 naming what is wrong with it.
fn name_of(body: &Value) -> Result<String, Problem> {
    let Value::Object(map) = body else {
        return Err(Problem::invalid(
            "the request body must be a JSON object such as {\"name\": \"…\"}",
        ));
    };
    if let Some(other) = map.keys().find(|k| *k != "name") {
        return Err(Problem::invalid(format!(
            "unknown field {other:?}: a session takes only name"
        )));
    }
    match map.get("name") {
        None => Err(Problem::invalid("name is required")),
        Some(v) => checked_name(v),
    }
}

/// A session name as given (`PATCH`, `POST /v1/sessions`), trimmed, or 400 saying what is
/// wrong with it: the one rule of both.
pub(super) fn checked_name(value: &Value) -> Result<String, Problem> {
    let name = match value {
        Value::String(s) => s.trim(),
        other => {
            return Err(Problem::invalid(format!(
                "name must be a string, not {}",
                match other {
                    Value::Null => "null",
                    Value::Bool(_) => "a boolean",
                    Value::Number(_) => "a number",
                    Value::Array(_) => "an array",
                    _ => "an object",
                }
            )))
        }
    };
    if name.is_empty() {
        return Err(Problem::invalid("name must not be empty"));
    }
    let chars = name.chars().count();
    if chars > MAX_NAME_CHARS {
        return Err(Problem::invalid(format!(
            "name is {chars} characters long; at most {MAX_NAME_CHARS} are allowed"
        )));
    }
    Ok(name.to_string())
}

/// A JSON object's members in document order, their values as written.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, &'de RawValue>()? {
                    out.push((k, v));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// `doc` (an object's JSON text) with `key` set to `value`: the other members keep their
/// order and bytes; a new key goes last.
fn with_member(doc: &str, key: &str, value: &Value) -> Result<String, Problem> {
    let members: Members<'_> = serde_json::from_str(doc)
        .map_err(|e| Problem::internal(format!("the stored session document: {e}")))?;
    let value = value.to_string();
    let mut out = String::with_capacity(doc.len() + value.len());
    out.push('{');
    let mut replaced = false;
    for (i, (k, v)) in members.0.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::String(k.clone()).to_string());
        out.push(':');
        if k == key && !replaced {
            out.push_str(&value);
            replaced = true;
        } else {
            out.push_str(v.get());
        }
    }
    if !replaced {
        if !members.0.is_empty() {
            out.push(',');
        }
        out.push_str(&Value::String(key.into()).to_string());
        out.push(':');
        out.push_str(&value);
    }
    out.push('}');
    Ok(out)
}

async fn stored_doc(state: &ApiState, caller: &Caller, id: &str) -> Result<String, Problem> {
    let out = state
        .store()
        .call(
            &caller.ns,
            StoreCall::AgentsGet {
                agent_id: id.into(),
            },
        )
        .await?;
    out.ok_or_else(|| no_session(id))
}

pub async fn patch(
    State(state): State<ApiState>,
    caller: Caller,
    Path(id): Path<String>,
    super::ApiJson(body): super::ApiJson<Value>,
) -> Result<Response, Problem> {
    caller.require_write("rename sessions")?;
    let name = name_of(&body)?;
    let doc = rename(&state, &caller, &id, name).await?;
    let reader = state.reader(&caller.ns);
    Ok(json_response(
        StatusCode::OK,
        &Session::from_doc(&doc, reader.latest_model(&id).await?),
    ))
}

/// Sets session `id`'s name (checked by [`checked_name`]) through the store's own
/// `agents.update`; the new document.
pub(super) async fn rename(
    state: &ApiState,
    caller: &Caller,
    id: &str,
    name: String,
) -> Result<Value, Problem> {
    let doc = stored_doc(state, caller, id).await?;
    let new = with_member(&doc, "name", &Value::String(name))?;
    let input = format!("{{\"agent\":{new}}}");
    let call = StoreCall::parse("agents", "update", &input)
        .map_err(|e| Problem::internal(format!("renaming session {id}: {e}")))?;
    match state.store().call(&caller.ns, call).await {
        Ok(_) => {}
        // Deleted between the read and the write.
        Err(crate::store::StoreError::NotFound(_)) => return Err(no_session(id)),
        Err(e) => return Err(e.into()),
    }
    serde_json::from_str(&new).map_err(|e| Problem::internal(e.to_string()))
}

pub async fn delete(
    State(state): State<ApiState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    caller.require_write("delete sessions")?;
    let reader = state.reader(&caller.ns);
    let doc = reader.agent(&id).await?.ok_or_else(|| no_session(&id))?;
    let mut never_started = false;
    if let Some(active) = doc.get("activeRunId").and_then(Value::as_str) {
        if let Some(run) = reader.run(active).await? {
            let pos = state.records().run_positions(&caller.ns, active).await?;
            let ended = is_terminal(&run)
                || super::runs::stored_end(&state, &caller.ns, active, pos)
                    .await?
                    .is_some();
            never_started = run.get("status").and_then(Value::as_str)
                == Some(crate::run::RunStatus::Queued.as_str())
                && pos.last_seq == 0;
            if !ended && !never_started {
                return Err(Problem::new(
                    ProblemCode::FailedPrecondition,
                    format!(
                        "session {id} has a run in progress ({active}); cancel it first \
                         (POST /v1/runs/{active}/cancel), then delete the session"
                    ),
                ));
            }
        }
    }
    let cwd = doc.get("cwd").and_then(Value::as_str).unwrap_or_default();
    match state.bridge(&caller.ns).get() {
        Ok(bridge) => {
            match bridge.close_agent(&id).await {
                Ok(()) => {}
                // Not loaded in this bridge (created before it restarted): nothing to forget.
                Err(ClientError::Status { code, .. }) if code.as_str() == "not_found" => {}
                Err(e) => return Err(bridge_problem("CloseAgent", &e)),
            }
            if never_started {
                store_cascade(&state, &caller, &id).await?;
            } else {
                bridge
                    .delete_agent(&id, cwd)
                    .await
                    .map_err(|e| bridge_problem("DeleteAgent", &e))?;
                // The SDK deletes runs, events, checkpoints and the agent; callbackd's own
                // rows of the agent (tool calls, approvals, notes, fork record) go with
                // the cascade, which finds nothing more of what the SDK removed.
                store_cascade(&state, &caller, &id).await?;
            }
        }
        Err(_) => store_cascade(&state, &caller, &id).await?,
    }
    tracing::info!(session = %id, namespace = %caller.ns.as_str(), "session deleted");
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `agents.delete` of the store: the agent and every row of it, in one transaction.
async fn store_cascade(state: &ApiState, caller: &Caller, id: &str) -> Result<(), Problem> {
    state
        .store()
        .call(
            &caller.ns,
            StoreCall::AgentsDelete(AgentFilter {
                agent_ids: Some(vec![id.to_string()]),
                cwd: None,
            }),
        )
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_rename_keeps_the_other_members_bytes_and_order() {
        let doc = r#"{"agentId":"a1","name":null,"n":1.50,"z":{"b":1,"a":2}}"#;
        assert_eq!(
            with_member(doc, "name", &json!("Q3 \"plan\"")).unwrap(),
            r#"{"agentId":"a1","name":"Q3 \"plan\"","n":1.50,"z":{"b":1,"a":2}}"#
        );
        assert_eq!(
            with_member(r#"{"agentId":"a1"}"#, "name", &json!("x")).unwrap(),
            r#"{"agentId":"a1","name":"x"}"#
        );
    }

    #[test]
    fn bad_names_are_refused_naming_the_field() {
        for (body, why) in [
            (json!({"name": ""}), "name must not be empty"),
            (json!({"name": "   "}), "name must not be empty"),
            (json!({"name": 3}), "name must be a string, not a number"),
            (json!({"name": null}), "name must be a string, not null"),
            (json!({}), "name is required"),
            (json!({"name": "a", "x": 1}), "unknown field \"x\""),
            (
                json!({"name": "é".repeat(201)}),
                "name is 201 characters long",
            ),
        ] {
            let p = name_of(&body).unwrap_err();
            assert_eq!(p.status, 400);
            assert!(p.detail.contains(why), "{}: {}", body, p.detail);
        }
        assert_eq!(name_of(&json!({"name": " Q3 "})).unwrap(), "Q3");
        assert_eq!(
            name_of(&json!({"name": "é".repeat(200)}))
                .unwrap()
                .chars()
                .count(),
            200
        );
    }
}
