//! Store reads of the run API, through the [`Store`] trait only (so they work on every
//! backend), and the JSON views the API answers with.

use serde::Serialize;
use serde_json::Value;

use super::problem::{run_problem, Problem};
pub use crate::account::Listed;
use crate::account::{listed, parse, StoredEvent};
use crate::clock::rfc3339_ms;
use crate::store::{
    AgentCursor, AgentFilter, Namespace, Page, RunCursor, RunFilter, RunRecords, Store, StoreCall,
};

/// A session (an agent), as the API shows it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Session {
    pub session_id: String,
    pub name: Option<String>,
    /// `null` when the agent document has no status, or one this version does not know.
    pub status: Option<SessionStatus>,
    pub model: Option<String>,
    pub cwd: Option<String>,
    pub active_run_id: Option<String>,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
    /// Where the session was forked from (`POST /v1/sessions/{id}/fork`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkedFrom>,
}

/// A session's status, as the bridge keeps it in the agent document (callback contract
/// §2.6): `idle` between turns, `running` during one, `error` after a failed one,
/// `archived` once archived. An enum so that clients generated from the OpenAPI document can
/// `switch` over it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    Idle,
    Running,
    Error,
    Archived,
}

impl SessionStatus {
    /// The status of the document's `status` field; `None` for a value this version does
    /// not know (a newer bridge), which the API shows as `null` rather than break its
    /// document.
    pub fn parse(s: &str) -> Option<SessionStatus> {
        match s {
            "idle" => Some(SessionStatus::Idle),
            "running" => Some(SessionStatus::Running),
            "error" => Some(SessionStatus::Error),
            "archived" => Some(SessionStatus::Archived),
            other => {
                tracing::debug!(
                    status = other,
                    "a session status this version does not know"
                );
                None
            }
        }
    }
}

/// Where a forked session came from.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ForkedFrom {
    pub session_id: String,
    pub run_id: String,
    /// `after` or `before`.
    pub at: String,
}

impl ForkedFrom {
    pub fn of(rec: &crate::store::forks::ForkRecord) -> ForkedFrom {
        ForkedFrom {
            session_id: rec.source_agent_id.clone(),
            run_id: rec.source_run_id.clone(),
            at: rec.at.clone(),
        }
    }
}

/// A run, as the API shows it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RunSummary {
    pub run_id: String,
    pub session_id: String,
    pub turn_number: Option<u64>,
    #[schemars(with = "crate::run::RunStatus")]
    pub status: String,
    pub model: Option<String>,
    pub created_at: Option<String>,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    pub last_seq: u64,
    #[schemars(with = "Option<super::schema::Usage>")]
    pub usage: Value,
    pub output: Option<String>,
    pub error: Option<Problem>,
    /// The user message that started the run (truncated in lists); `null` when callbackd
    /// has none recorded (a run started by another client than the run API).
    pub input: Option<crate::account::RunInput>,
}

fn time_of(doc: &Value, key: &str) -> Option<String> {
    doc.get(key)
        .and_then(Value::as_f64)
        .map(|ms| rfc3339_ms(ms as i64))
}

fn str_of(doc: &Value, key: &str) -> Option<String> {
    doc.get(key).and_then(Value::as_str).map(str::to_string)
}

impl Session {
    pub fn from_doc(doc: &Value, model: Option<String>) -> Session {
        Session {
            session_id: str_of(doc, "agentId").unwrap_or_default(),
            name: str_of(doc, "name"),
            status: doc
                .get("status")
                .and_then(Value::as_str)
                .and_then(SessionStatus::parse),
            model: model.or_else(|| {
                doc.pointer("/model/id")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            }),
            cwd: str_of(doc, "cwd"),
            active_run_id: str_of(doc, "activeRunId"),
            created_at: time_of(doc, "createdAt"),
            updated_at: time_of(doc, "updatedAt"),
            forked_from: None,
        }
    }
}

impl RunSummary {
    pub fn from_doc(doc: &Value, last_seq: u64) -> RunSummary {
        RunSummary {
            run_id: str_of(doc, "runId").unwrap_or_default(),
            session_id: str_of(doc, "agentId").unwrap_or_default(),
            turn_number: doc.get("turnNumber").and_then(Value::as_u64),
            status: str_of(doc, "status")
                .unwrap_or_else(|| crate::run::RunStatus::Queued.as_str().into()),
            model: doc
                .pointer("/model/id")
                .and_then(Value::as_str)
                .map(str::to_string),
            created_at: time_of(doc, "createdAt"),
            started_at: time_of(doc, "startedAt"),
            ended_at: time_of(doc, "endedAt"),
            last_seq,
            usage: doc.get("usage").cloned().unwrap_or(Value::Null),
            output: str_of(doc, "result"),
            error: str_of(doc, "error").map(|e| run_problem(Some(&e))),
            input: None,
        }
    }
}

/// Whether a run document's status is final.
pub fn is_terminal(doc: &Value) -> bool {
    crate::run::RunStatus::of_doc(doc).is_some_and(crate::run::RunStatus::is_terminal)
}

/// The run API's view of the store.
pub struct Reader<'a> {
    pub store: &'a dyn Store,
    /// callbackd's own reads beside the bridge's substores (the latest run of an agent).
    pub records: &'a dyn RunRecords,
    pub ns: &'a Namespace,
}

impl Reader<'_> {
    pub async fn agent(&self, id: &str) -> Result<Option<Value>, Problem> {
        let out = self
            .store
            .call(
                self.ns,
                StoreCall::AgentsGet {
                    agent_id: id.into(),
                },
            )
            .await?;
        Ok(out.as_deref().map(parse).transpose()?)
    }

    pub async fn agents(&self, limit: usize, cursor: Option<&str>) -> Result<Listed, Problem> {
        let cursor = cursor
            .map(AgentCursor::decode)
            .transpose()
            .map_err(|_| Problem::invalid("cursor is not a cursor this API returned"))?;
        let out = self
            .store
            .call(
                self.ns,
                StoreCall::AgentsList(AgentFilter::default(), Page { cursor, limit }),
            )
            .await?;
        Ok(listed(&out)?)
    }

    pub async fn runs_of(
        &self,
        agent_id: &str,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Listed, Problem> {
        let cursor = cursor
            .map(RunCursor::decode)
            .transpose()
            .map_err(|_| Problem::invalid("cursor is not a cursor this API returned"))?;
        let filter = RunFilter {
            agent_ids: Some(vec![agent_id.into()]),
            run_ids: None,
        };
        let out = self
            .store
            .call(self.ns, StoreCall::RunsList(filter, Page { cursor, limit }))
            .await?;
        Ok(listed(&out)?)
    }

    /// A run by id alone (the API's paths do not name its agent).
    pub async fn run(&self, run_id: &str) -> Result<Option<Value>, Problem> {
        Ok(crate::account::run_doc(self.store, self.ns, run_id).await?)
    }

    /// The model of an agent's latest run, for a session's `model`.
    /// One indexed read of the latest run, not a walk through all the agent's runs.
    pub async fn latest_model(&self, agent_id: &str) -> Result<Option<String>, Problem> {
        let Some(doc) = self.records.latest_run(self.ns, agent_id).await? else {
            return Ok(None);
        };
        Ok(parse(&doc)?
            .pointer("/model/id")
            .and_then(Value::as_str)
            .map(str::to_string))
    }

    /// Stored events with `seq > after`, at most `limit`, in seq order.
    pub async fn events_after(
        &self,
        run_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, Problem> {
        Ok(crate::account::events_after(self.store, self.ns, run_id, after, limit).await?)
    }
}

/// The 404 of an unknown session (or one of another namespace).
pub fn no_session(id: &str) -> Problem {
    Problem::not_found(format!("no session {id:?} (GET /v1/sessions lists them)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_session_status_is_one_of_four_and_an_unknown_one_is_null() {
        for s in ["idle", "running", "error", "archived"] {
            let view = Session::from_doc(&json!({"agentId": "a", "status": s}), None);
            assert_eq!(serde_json::to_value(&view).unwrap()["status"], s);
        }
        for doc in [
            json!({"agentId": "a", "status": "sleeping"}),
            json!({"agentId": "a"}),
        ] {
            let view = Session::from_doc(&doc, None);
            assert_eq!(view.status, None, "{doc}");
            assert_eq!(serde_json::to_value(&view).unwrap()["status"], Value::Null);
        }
    }
}
