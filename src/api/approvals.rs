//! `/v1/approvals`: the pending approvals of held tool calls, and deciding them (spec §7).

use axum::extract::{Path, State};
use axum::response::Response;
use http::{StatusCode, Uri};
use serde::{Deserialize, Serialize};

use super::problem::{Problem, ProblemCode};
use super::{json_response, query, ApiJson, ApiState, Caller};
use crate::approvals::{ApprovalView, DecideError};

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
    let by = format!("{}/{}", caller.ns.as_str(), state.config().label);
    match state
        .approvals()
        .decide(&caller.ns, &id, approve, &by, body.reason)
        .await
    {
        Ok(rec) => Ok(json_response(StatusCode::OK, &ApprovalView::from(&rec))),
        // Another namespace's id answers as an unknown one: no existence leak.
        Err(DecideError::NotFound(_)) => Err(Problem::not_found(format!(
            "no approval {id:?} (GET /v1/approvals lists the pending ones)"
        ))),
        Err(DecideError::Decided(rec)) => {
            let mut p = Problem::new(
                ProblemCode::FailedPrecondition,
                format!(
                    "approval {id} is already {}{}{}",
                    rec.state,
                    rec.decided_by
                        .as_deref()
                        .map(|b| format!(" by {b}"))
                        .unwrap_or_default(),
                    rec.reason
                        .as_deref()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default()
                ),
            );
            p.status = StatusCode::CONFLICT.as_u16();
            Err(p)
        }
        Err(DecideError::Store(e)) => Err(e.into()),
    }
}
