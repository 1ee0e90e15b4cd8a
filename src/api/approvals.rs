//! `/v1/approvals`: the pending approvals of held tool calls, and deciding them (spec §7):
//! approve (optionally with edited arguments, checked against the tool's input schema) or
//! deny. A decision on an approval that is no longer pending is `409`, saying what happened
//! to it and when.

use axum::extract::{Path, State};
use axum::response::Response;
use http::{StatusCode, Uri};
use serde::{Deserialize, Serialize};

use super::problem::{Problem, ProblemCode};
use super::{json_response, query, ApiJson, ApiState, Caller};
use crate::approvals::{ApprovalView, DecideError};
use crate::clock::rfc3339_ms;
use crate::store::approvals::ApprovalRecord;

/// `GET /v1/approvals` answer.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ApprovalList {
    pub approvals: Vec<ApprovalView>,
}

/// `POST /v1/approvals/{id}` body.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    /// `approve` or `deny`.
    #[schemars(with = "super::schema::Verdict")]
    pub decision: String,
    /// Why; the model is told it with a denial.
    pub reason: Option<String>,
    /// With `approve`: the arguments to run the tool with instead of the model's (an
    /// object valid against the tool's input schema). The record keeps both.
    pub args: Option<serde_json::Value>,
}

pub async fn list(
    State(state): State<ApiState>,
    caller: Caller,
    uri: Uri,
) -> Result<Response, Problem> {
    let q = query(&uri)?;
    let filter = match q.get("state").map(String::as_str) {
        None | Some("pending") => Some("pending"),
        Some("all") => None,
        Some(s @ ("approved" | "denied" | "expired" | "cancelled")) => Some(s),
        Some(other) => {
            return Err(Problem::invalid(format!(
                "state must be pending, approved, denied, expired, cancelled or all, not {other:?}"
            )))
        }
    };
    let records = state
        .approvals()
        .records()
        .approvals(&caller.ns, filter)
        .await?;
    Ok(json_response(
        StatusCode::OK,
        &ApprovalList {
            approvals: records.iter().map(ApprovalView::from).collect(),
        },
    ))
}

pub async fn decide(
    State(state): State<ApiState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Decision>,
) -> Result<Response, Problem> {
    caller.require_write("decide approvals")?;
    let approve = match body.decision.as_str() {
        "approve" => true,
        "deny" => false,
        other => {
            return Err(Problem::invalid(format!(
                "decision must be \"approve\" or \"deny\", not {other:?}"
            )))
        }
    };
    if body.args.is_some() && !approve {
        return Err(Problem::invalid(
            "args are the edited arguments to approve the call with; a denial takes none",
        ));
    }
    let by = format!("{}/{}", caller.ns.as_str(), state.config().label);
    if approve {
        // A question is answered, not approved: its answer is the tool's result.
        if let Some(rec) = state
            .approvals()
            .records()
            .approval(&caller.ns, &id)
            .await?
        {
            if rec.tool == crate::tools::builtin::ask_user::NAME && rec.state == "pending" {
                return Err(Problem::invalid(format!(
                    "{id} is a question to the person: answer it with POST /v1/runs/{}/resume \
                     {{\"question_id\": \"{id}\", \"answer\": ...}} (or deny it here)",
                    rec.run_id.as_deref().unwrap_or("RUN_ID")
                )));
            }
        }
    }
    if let Some(args) = &body.args {
        // Checked before the decision is recorded: a refused edit leaves it pending.
        let rec = match state
            .approvals()
            .records()
            .approval(&caller.ns, &id)
            .await?
        {
            Some(rec) => rec,
            None => return Err(unknown(&id)),
        };
        if rec.state != "pending" {
            return Err(conflict(&rec));
        }
        check_args(&state, &rec, args)?;
    }
    let decision = crate::approvals::Decision {
        approve,
        by,
        reason: body.reason,
        args: body.args,
    };
    match state.approvals().decide(&caller.ns, &id, decision).await {
        Ok(rec) => Ok(json_response(StatusCode::OK, &ApprovalView::from(&rec))),
        // Another namespace's id answers as an unknown one: no existence leak.
        Err(DecideError::NotFound(_)) => Err(unknown(&id)),
        Err(DecideError::Decided(rec)) => Err(conflict(&rec)),
        Err(DecideError::Store(e)) => Err(e.into()),
    }
}

/// `GET /v1/approvals/{approval_id}`: one approval, in any state.
pub async fn get_one(
    State(state): State<ApiState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    match state
        .approvals()
        .records()
        .approval(&caller.ns, &id)
        .await?
    {
        Some(rec) => Ok(json_response(StatusCode::OK, &ApprovalView::from(&rec))),
        None => Err(unknown(&id)),
    }
}

fn unknown(id: &str) -> Problem {
    Problem::not_found(format!(
        "no approval {id:?} (GET /v1/approvals lists the pending ones)"
    ))
}

/// `409`: what happened to the approval, by whom, when and why.
pub(super) fn conflict(rec: &ApprovalRecord) -> Problem {
    let mut p = Problem::new(
        ProblemCode::FailedPrecondition,
        format!(
            "approval {} is already {}{}{}{}",
            rec.id,
            rec.state,
            rec.decided_by
                .as_deref()
                .map(|b| format!(" by {b}"))
                .unwrap_or_default(),
            rec.decided_at_ms
                .map(|t| format!(" at {}", rfc3339_ms(t)))
                .unwrap_or_default(),
            rec.reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        ),
    );
    p.status = StatusCode::CONFLICT.as_u16();
    p
}

/// Edited arguments must be what the tool accepts: `400` naming the pointer and keyword.
pub(super) fn check_args(
    state: &ApiState,
    rec: &ApprovalRecord,
    args: &serde_json::Value,
) -> Result<(), Problem> {
    if !args.is_object() {
        return Err(Problem::invalid(
            "args must be a JSON object: the tool's arguments",
        ));
    }
    let Some(tool) = state.tools().registry().get(&rec.tool) else {
        return Err(Problem::invalid(format!(
            "tool {:?} is no longer served here, so edited arguments cannot be checked; \
             approve or deny without args",
            rec.tool
        )));
    };
    tool.input_schema().validate(args).map_err(|v| {
        Problem::invalid(format!(
            "args do not match tool {:?}'s input schema: {}{}; the approval is still pending",
            rec.tool,
            v.shown
                .iter()
                .map(|x| format!("at {:?} (keyword {}): {}", x.pointer, x.keyword, x.message))
                .collect::<Vec<_>>()
                .join("; "),
            if v.more > 0 {
                format!(" and {} more", v.more)
            } else {
                String::new()
            }
        ))
    })
}
