//! [`ConnectError`]: the one error type every request path ends in, rendered as the Connect
//! JSON error body `{"code": ..., "message": ...}`.

use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue, StatusCode};

use super::Code;

/// An error answered to the client. The message is for the caller: it names what was wrong
/// with the request, and never carries SQL, file paths or secrets (those go to the log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectError {
    pub code: Code,
    pub message: String,
    /// Set for the few protocol-level answers whose HTTP status the Connect spec fixes
    /// independently of the code (405 for a wrong HTTP method, 404 for an unknown
    /// procedure, 415 for an unsupported codec).
    status: Option<StatusCode>,
}

impl ConnectError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        ConnectError {
            code,
            message: message.into(),
            status: None,
        }
    }

    pub fn invalid_argument(message: impl Into<String>) -> Self {
        Self::new(Code::InvalidArgument, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(Code::Internal, message)
    }

    /// The same error, sent with a specific HTTP status instead of the code's own.
    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = Some(status);
        self
    }

    /// The HTTP status this error is sent with.
    pub fn http_status(&self) -> StatusCode {
        self.status.unwrap_or_else(|| self.code.http_status())
    }

    /// The JSON error body.
    pub fn to_json(&self) -> String {
        serde_json::json!({ "code": self.code.as_str(), "message": self.message }).to_string()
    }
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}] {}", self.code, self.message)
    }
}

impl std::error::Error for ConnectError {}

impl IntoResponse for ConnectError {
    fn into_response(self) -> Response {
        let mut response = (self.http_status(), self.to_json()).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if self.http_status() == StatusCode::METHOD_NOT_ALLOWED {
            headers.insert(header::ALLOW, HeaderValue::from_static("POST"));
        }
        if self.http_status() == StatusCode::UNSUPPORTED_MEDIA_TYPE {
            headers.insert(
                "accept-post",
                HeaderValue::from_static("application/json, application/proto"),
            );
        }
        response
    }
}
