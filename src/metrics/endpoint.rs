//! `GET /metrics`: the Prometheus text exposition, behind the metrics token when one is set.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{header, HeaderMap};

use super::Metrics;
use crate::connect::{Code, ConnectError};

/// The path Prometheus scrapes.
pub const PATH: &str = "/metrics";

/// Answers the exposition, or `401 unauthenticated` when a token is configured and the
/// request does not carry it (`Authorization: Bearer <token>`, exactly once).
pub async fn scrape(State(metrics): State<Metrics>, headers: HeaderMap) -> Response {
    if let Some(tokens) = metrics.token() {
        let mut values = headers.get_all(header::AUTHORIZATION).iter();
        let presented = match (values.next(), values.next()) {
            (Some(v), None) => Some(v.as_bytes()),
            _ => None,
        };
        if tokens.authorize(presented).is_none() {
            crate::auth::refused("metrics", presented.is_some());
            return ConnectError::new(
                Code::Unauthenticated,
                "missing or invalid bearer token: /metrics needs the metrics token \
                 (metrics.token), not the bridge's tokens",
            )
            .into_response();
        }
    }
    (
        [(
            header::CONTENT_TYPE,
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        )],
        metrics.encode(),
    )
        .into_response()
}
