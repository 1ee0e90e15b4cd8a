//! CORS for `/v1` (`[api] cors_origins`): a page on one of the configured origins may call
//! the run API from a browser. A preflight from such an origin is answered here; every
//! other answer to it gets `Access-Control-Allow-Origin` with its origin. Any other origin
//! gets no CORS header at all (the browser then refuses the answer), and no preflight
//! answer: the request goes on to the router like any other.
//!
//! No `Access-Control-Allow-Credentials`: the API takes bearer tokens (a header, or a stream
//! token in the URL), never cookies.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue, Method, StatusCode};

use super::ApiState;

/// How long a browser may cache a preflight answer.
const MAX_AGE_SECS: &str = "600";

pub async fn cors(State(state): State<ApiState>, req: Request, next: Next) -> Response {
    let origins = &state.config().cors_origins;
    if origins.is_empty() {
        return next.run(req).await;
    }
    let allowed = req
        .headers()
        .get(header::ORIGIN)
        .filter(|o| origins.iter().any(|a| a.as_bytes() == o.as_bytes()))
        .cloned();
    let preflight = req.method() == Method::OPTIONS
        && req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let mut response = match (&allowed, preflight) {
        (Some(_), true) => {
            let mut r = StatusCode::NO_CONTENT.into_response();
            let h = r.headers_mut();
            h.insert(
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static("GET, POST, PATCH, DELETE, OPTIONS"),
            );
            h.insert(
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static("authorization, content-type, last-event-id"),
            );
            h.insert(
                header::ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from_static(MAX_AGE_SECS),
            );
            r
        }
        _ => next.run(req).await,
    };
    let h = response.headers_mut();
    // The answer depends on the Origin header: caches must not share it across origins.
    h.append(header::VARY, HeaderValue::from_static("origin"));
    if let Some(origin) = allowed {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    }
    response
}
