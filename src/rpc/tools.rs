//! `CallCustomTool`. Placeholder until the tool registry lands: every call answers
//! `unimplemented`, after authentication and protocol checks.

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::HeaderMap;

use super::RpcState;
use crate::connect::{read_unary, Code, ConnectError};

/// The tool side of the daemon (registry and limits).
#[derive(Clone, Default)]
pub struct ToolService {}

pub async fn call_custom_tool(
    State(state): State<RpcState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match read_unary(&headers, body, state.limits).await {
        Ok(_) => ConnectError::new(Code::Unimplemented, "custom tools are not available yet")
            .into_response(),
        Err(e) => e.into_response(),
    }
}
