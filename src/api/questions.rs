//! `POST /v1/runs/{run_id}/resume` `{question_id, answer}`: answers the run's open question
//! (a held `ask_user` call); the answer becomes the tool's result. A question is an approval
//! of the `ask_user` tool underneath: the same record, ownership and expiry.

use axum::extract::{Path, State};
use axum::response::Response;
use http::StatusCode;
use serde::Deserialize;
use serde_json::json;

use super::problem::Problem;
use super::{json_response, ApiJson, ApiState, Caller};
use crate::approvals::{ApprovalView, DecideError, Decision};
use crate::tools::builtin::ask_user;

/// `POST /v1/runs/{run_id}/resume` body.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    /// The `id` of the `question` event.
    pub question_id: String,
    /// The person's answer: one of the options, or their own words.
    pub answer: String,
}

pub async fn resume(
    State(state): State<ApiState>,
    caller: Caller,
    Path(run_id): Path<String>,
    ApiJson(body): ApiJson<Answer>,
) -> Result<Response, Problem> {
    caller.require_write("answer questions")?;
    let unknown = || {
        Problem::not_found(format!(
            "run {run_id} has no question {:?} (the run's stream shows its open questions)",
            body.question_id
        ))
    };
    let records = state.approvals().records().clone();
    let Some(rec) = records.approval(&caller.ns, &body.question_id).await? else {
        return Err(unknown());
    };
    if rec.tool != ask_user::NAME || rec.run_id.as_deref() != Some(run_id.as_str()) {
        return Err(unknown());
    }
    if rec.state != "pending" {
        return Err(super::approvals::conflict(&rec));
    }
    let args = with_answer(&rec.args, &body.answer);
    let decision = Decision {
        approve: true,
        by: format!("{}/{}", caller.ns.as_str(), state.config().label),
        reason: None,
        args: Some(args),
    };
    match state
        .approvals()
        .decide(&caller.ns, &body.question_id, decision)
        .await
    {
        Ok(rec) => Ok(json_response(StatusCode::OK, &ApprovalView::from(&rec))),
        Err(DecideError::NotFound(_)) => Err(unknown()),
        Err(DecideError::Decided(rec)) => Err(super::approvals::conflict(&rec)),
        Err(DecideError::Store(e)) => Err(e.into()),
    }
}

/// The arguments of an answered question: the call's own with the person's `answer` (its
/// result), here and through AG-UI's `resume`.
pub(super) fn with_answer(args: &serde_json::Value, answer: &str) -> serde_json::Value {
    let mut args = args.clone();
    if let Some(obj) = args.as_object_mut() {
        obj.insert("answer".into(), json!(answer));
    } else {
        args = json!({ "answer": answer });
    }
    args
}
