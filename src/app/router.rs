//! The daemon's one route table: the bridge's two callback RPCs (`rpc`), the run API
//! (`/v1`, `api`), `/metrics`, `/healthz` and the console (`/ui/`).
//!
//! Layer order (each `.layer()` wraps what came before, so the last one listed runs first):
//! panic catcher outermost, so a panicking handler still gets a Connect `internal` answer;
//! per route, the bearer check of that service's tokens, then the handler. `/healthz`
//! sits outside auth for container health checks; `/metrics` checks its own token.

use std::any::Any;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use http::{Method, StatusCode, Uri};
use tower_http::catch_panic::CatchPanicLayer;

use crate::auth::{BearerAuthLayer, TokenSet};
use crate::connect::{Code, ConnectError};
use crate::rpc::{self, RpcState, STORE_PATH, TOOL_PATH};

/// The daemon's routes.
pub fn router(
    state: RpcState,
    store_tokens: TokenSet,
    tool_tokens: TokenSet,
    api: Router,
) -> Router {
    let metrics = state.metrics.clone();
    Router::new()
        .route(
            STORE_PATH,
            post(rpc::store::call_store).route_layer(BearerAuthLayer::new(store_tokens, "store")),
        )
        .route(
            TOOL_PATH,
            post(rpc::tools::call_custom_tool)
                .route_layer(BearerAuthLayer::new(tool_tokens, "tools")),
        )
        .route("/healthz", get(healthz))
        .route(
            crate::metrics::endpoint::PATH,
            get(crate::metrics::endpoint::scrape).with_state(metrics),
        )
        .merge(crate::ui::router())
        .fallback(unknown_path)
        .method_not_allowed_fallback(wrong_method)
        .with_state(state)
        .merge(api)
        .layer(CatchPanicLayer::custom(panicked))
}

async fn healthz() -> Response {
    (
        [(http::header::CONTENT_TYPE, "application/json")],
        r#"{"status":"ok"}"#,
    )
        .into_response()
}

async fn unknown_path(uri: Uri) -> ConnectError {
    ConnectError::new(
        Code::Unimplemented,
        format!(
            "unknown procedure {}: this server serves {STORE_PATH} and {TOOL_PATH}",
            uri.path()
        ),
    )
    .with_status(StatusCode::NOT_FOUND)
}

async fn wrong_method(method: Method, uri: Uri) -> ConnectError {
    ConnectError::new(
        Code::Unimplemented,
        format!(
            "HTTP method {method} is not supported for {}: Connect unary calls use POST",
            uri.path()
        ),
    )
    .with_status(StatusCode::METHOD_NOT_ALLOWED)
}

fn panicked(_: Box<dyn Any + Send + 'static>) -> Response<Body> {
    tracing::error!("a request handler panicked");
    ConnectError::internal("internal error: the request handler failed").into_response()
}
