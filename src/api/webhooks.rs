//! `GET /v1/webhooks/deliveries`: the namespace's recent webhook deliveries (`[[webhooks]]`,
//! docs/webhooks.md) read from the store's outbox, newest first: what was sent where, how
//! many attempts it took, the last answer or error, and when the next attempt is due. What
//! `callbackd webhooks` and the console's operations view show.

use axum::extract::State;
use axum::response::Response;
use http::{StatusCode, Uri};
use serde::Serialize;
use serde_json::Value;

use super::problem::Problem;
use super::{json_response, query, ApiState, Caller};
use crate::clock::rfc3339_ms;
use crate::store::outbox::Delivery;

/// One event sent to one endpoint.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct DeliveryView {
    /// The event's `webhook-id`, the same on every attempt.
    pub id: String,
    /// `approval.required`, `approval.resolved`, `question.asked`, `question.answered` or
    /// `run.ended`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The endpoint, without its query string (which may hold a token).
    pub url: String,
    pub run_id: Option<String>,
    /// `pending` (waiting for an attempt), `delivered` or `failed` (given up).
    pub state: String,
    pub attempts: i64,
    pub created_at: String,
    /// When the next attempt is due, while pending.
    pub next_attempt_at: Option<String>,
    pub last_attempt_at: Option<String>,
    /// The HTTP status of the last answer, if there was one.
    pub last_status: Option<i64>,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
    /// The JSON body posted.
    pub payload: Value,
}

/// Deliveries, newest first.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct DeliveryList {
    pub deliveries: Vec<DeliveryView>,
}

impl From<Delivery> for DeliveryView {
    fn from(d: Delivery) -> Self {
        let url = match d.entry.url.split_once('?') {
            Some((base, _)) => format!("{base}?…"),
            None => d.entry.url,
        };
        DeliveryView {
            id: d.entry.id,
            kind: d.entry.kind,
            url,
            run_id: d.entry.run_id,
            next_attempt_at: (d.state == "pending").then(|| rfc3339_ms(d.next_at_ms)),
            state: d.state,
            attempts: d.attempts,
            created_at: rfc3339_ms(d.entry.created_at_ms),
            last_attempt_at: d.last_at_ms.map(rfc3339_ms),
            last_status: d.last_status,
            last_error: d.last_error,
            payload: serde_json::from_str(&d.entry.body).unwrap_or(Value::Null),
        }
    }
}

/// `?state=pending|delivered|failed|all` (default all), `?limit=` 1 to 1000 (default 100).
pub async fn list(
    State(state): State<ApiState>,
    caller: Caller,
    uri: Uri,
) -> Result<Response, Problem> {
    let q = query(&uri)?;
    let filter = match q.get("state").map(String::as_str) {
        None | Some("all") => None,
        Some(s @ ("pending" | "delivered" | "failed")) => Some(s),
        Some(other) => {
            return Err(Problem::invalid(format!(
                "state must be pending, delivered, failed or all, not {other:?}"
            )))
        }
    };
    let limit = match q.get("limit") {
        None => 100,
        Some(l) => match l.parse::<i64>() {
            Ok(n @ 1..=1000) => n,
            _ => {
                return Err(Problem::invalid(format!(
                    "limit must be a whole number from 1 to 1000, not {l:?}"
                )))
            }
        },
    };
    let deliveries = state
        .store()
        .clone()
        .outbox_records()
        .deliveries(&caller.ns, filter, limit)
        .await?;
    Ok(json_response(
        StatusCode::OK,
        &DeliveryList {
            deliveries: deliveries.into_iter().map(DeliveryView::from).collect(),
        },
    ))
}
