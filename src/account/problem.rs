//! [`Problem`]: the run API's error document (RFC 9457, with the spec's `code`, run-api.md
//! §4), here because a failed run's account tells its failure as one (the `error` stream
//! event's `problem`, the run state's `error`): [`run_problem`]. Answering one over HTTP
//! is the API's (`api::problem`).

use http::StatusCode;
use serde::Serialize;

/// The spec's error codes, each with its HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProblemCode {
    Unauthenticated,
    PermissionDenied,
    NotFound,
    InvalidArgument,
    /// 405: the path exists, the method does not (the `Allow` header lists the ones that do).
    MethodNotAllowed,
    /// 409: the request conflicts with the run's state (a message while a run is active, a
    /// cancel of a terminal run). Not in the spec's list; the choice is in the README.
    FailedPrecondition,
    /// 413: the body is larger than `api.max_body_bytes`.
    PayloadTooLarge,
    /// 429: `api.max_streams` streams are open.
    ResourceExhausted,
    ReplayExpired,
    NotImplemented,
    Unavailable,
    Internal,
}

impl ProblemCode {
    pub fn status(self) -> StatusCode {
        match self {
            ProblemCode::Unauthenticated => StatusCode::UNAUTHORIZED,
            ProblemCode::PermissionDenied => StatusCode::FORBIDDEN,
            ProblemCode::NotFound => StatusCode::NOT_FOUND,
            ProblemCode::InvalidArgument => StatusCode::BAD_REQUEST,
            ProblemCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ProblemCode::FailedPrecondition => StatusCode::CONFLICT,
            ProblemCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ProblemCode::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
            ProblemCode::ReplayExpired => StatusCode::GONE,
            ProblemCode::NotImplemented => StatusCode::NOT_IMPLEMENTED,
            ProblemCode::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ProblemCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ProblemCode::Unauthenticated => "unauthenticated",
            ProblemCode::PermissionDenied => "permission_denied",
            ProblemCode::NotFound => "not_found",
            ProblemCode::InvalidArgument => "invalid_argument",
            ProblemCode::MethodNotAllowed => "method_not_allowed",
            ProblemCode::FailedPrecondition => "failed_precondition",
            ProblemCode::PayloadTooLarge => "payload_too_large",
            ProblemCode::ResourceExhausted => "resource_exhausted",
            ProblemCode::ReplayExpired => "replay_expired",
            ProblemCode::NotImplemented => "not_implemented",
            ProblemCode::Unavailable => "unavailable",
            ProblemCode::Internal => "internal",
        }
    }

    pub const ALL: [ProblemCode; 12] = [
        ProblemCode::Unauthenticated,
        ProblemCode::PermissionDenied,
        ProblemCode::NotFound,
        ProblemCode::InvalidArgument,
        ProblemCode::MethodNotAllowed,
        ProblemCode::FailedPrecondition,
        ProblemCode::PayloadTooLarge,
        ProblemCode::ResourceExhausted,
        ProblemCode::ReplayExpired,
        ProblemCode::NotImplemented,
        ProblemCode::Unavailable,
        ProblemCode::Internal,
    ];
}

/// A problem document. Also the `problem` of an `error` stream event.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Problem {
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    pub code: ProblemCode,
}

impl Problem {
    pub fn new(code: ProblemCode, detail: impl Into<String>) -> Self {
        let status = code.status();
        Problem {
            kind: format!("urn:callbackd:problem:{}", code.as_str()),
            title: status.canonical_reason().unwrap_or("Error").to_string(),
            status: status.as_u16(),
            detail: detail.into(),
            code,
        }
    }

    pub fn invalid(detail: impl Into<String>) -> Self {
        Problem::new(ProblemCode::InvalidArgument, detail)
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Problem::new(ProblemCode::NotFound, detail)
    }

    pub fn internal(detail: impl Into<String>) -> Self {
        Problem::new(ProblemCode::Internal, detail)
    }
}

/// The problem of a failed run from the bridge's failure text, `[code] message` when the
/// backend gave a code.
pub fn run_problem(text: Option<&str>) -> Problem {
    let text = text.unwrap_or("the run failed (the bridge gave no reason)");
    let code = text
        .strip_prefix('[')
        .and_then(|rest| rest.split_once(']'))
        .map(|(code, _)| code)
        .unwrap_or("");
    let code = match code {
        "resource_exhausted" => ProblemCode::ResourceExhausted,
        "unavailable" | "deadline_exceeded" => ProblemCode::Unavailable,
        "not_found" => ProblemCode::NotFound,
        "permission_denied" => ProblemCode::PermissionDenied,
        "unauthenticated" => ProblemCode::Unauthenticated,
        "invalid_argument" => ProblemCode::InvalidArgument,
        "unimplemented" => ProblemCode::NotImplemented,
        "failed_precondition" => ProblemCode::FailedPrecondition,
        _ => ProblemCode::Internal,
    };
    Problem::new(code, text)
}
