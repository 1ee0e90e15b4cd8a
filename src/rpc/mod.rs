//! The two callback RPCs, where the Connect protocol meets the store and the tools.
//!
//! Layer order (each `.layer()` wraps what came before, so the last one listed runs first):
//! panic catcher outermost, so a panicking handler still gets a Connect `internal` answer;
//! per route, the bearer check of that service's tokens, then the handler. `/healthz`
//! sits outside auth for container health checks.

mod call_log;
pub mod codec;
mod run_log;
pub mod store;
pub mod tools;
mod unknown_field;

use std::any::Any;
use std::sync::Arc;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use http::{Method, StatusCode, Uri};
use tower_http::catch_panic::CatchPanicLayer;

use crate::auth::{BearerAuthLayer, TokenSet};
use crate::connect::{Code, ConnectError, UnaryLimits};
use crate::store::{RunRecords, Store, StoreError};

pub const STORE_PATH: &str = "/sdk.v1.SdkStoreCallbackService/CallStore";
pub const TOOL_PATH: &str = "/sdk.v1.SdkCustomToolCallbackService/CallCustomTool";

/// What the handlers share.
#[derive(Clone)]
pub struct RpcState {
    pub store: Arc<dyn Store>,
    pub tools: tools::ToolService,
    pub limits: UnaryLimits,
    /// Where tool calls are recorded for the run API (`None`: not recorded).
    pub records: Option<Arc<dyn RunRecords>>,
    /// Where held calls wait for a decision (`None`: a held call is refused).
    pub approvals: Option<crate::approvals::Approvals>,
    pub metrics: crate::metrics::Metrics,
    /// The namespaces' quotas, checked before each store write.
    pub quotas: crate::namespaces::quota::QuotaGate,
    /// The namespaces in force (tool allowlists).
    pub namespaces: crate::namespaces::Namespaces,
}

/// The daemon's routes.
pub fn router(
    state: RpcState,
    store_tokens: TokenSet,
    tool_tokens: TokenSet,
    api: Router,
) -> Router {
    Router::new()
        .route(
            STORE_PATH,
            post(store::call_store).route_layer(BearerAuthLayer::new(store_tokens, "store")),
        )
        .route(
            TOOL_PATH,
            post(tools::call_custom_tool).route_layer(BearerAuthLayer::new(tool_tokens, "tools")),
        )
        .route("/healthz", get(healthz))
        .route(
            crate::metrics::endpoint::PATH,
            get(crate::metrics::endpoint::scrape),
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

impl From<StoreError> for ConnectError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Invalid(m) => ConnectError::new(Code::InvalidArgument, m),
            StoreError::NotFound(m) => ConnectError::new(Code::NotFound, m),
            StoreError::AlreadyExists(m) => ConnectError::new(Code::AlreadyExists, m),
            StoreError::Full(detail) => {
                tracing::error!(%detail, "store is out of space");
                ConnectError::new(
                    Code::ResourceExhausted,
                    "the store is out of disk space; nothing was written",
                )
            }
            StoreError::Quota(m) => ConnectError::new(Code::ResourceExhausted, m),
            StoreError::DataLoss(m) => ConnectError::new(Code::DataLoss, m),
            StoreError::Unavailable(m) => ConnectError::new(Code::Unavailable, m),
            StoreError::Internal(detail) => {
                tracing::error!(%detail, "internal store error");
                ConnectError::internal("internal store error (details in the callbackd log)")
            }
        }
    }
}
