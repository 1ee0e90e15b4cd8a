//! How the bridge's failures reach the run API's clients: an unattached bridge is `501`, a
//! failed call the bridge's own message under the closest code.

use super::problem::{Problem, ProblemCode};
use crate::bridge::NoBridge;
use crate::connect::client::ClientError;

impl From<NoBridge> for Problem {
    fn from(_: NoBridge) -> Self {
        Problem::new(ProblemCode::NotImplemented, NoBridge::HOW)
    }
}

/// The problem for a failed bridge call: `503 unavailable` when it could not be reached,
/// else the bridge's own message under the closest code.
pub fn bridge_problem(what: &str, e: &ClientError) -> Problem {
    let code = match e {
        ClientError::Transport { .. } => ProblemCode::Unavailable,
        ClientError::Protocol { .. } => ProblemCode::Unavailable,
        ClientError::Status { code, .. } => match code.as_str() {
            "not_found" => ProblemCode::NotFound,
            "invalid_argument" => ProblemCode::InvalidArgument,
            "failed_precondition" | "already_exists" | "aborted" => ProblemCode::FailedPrecondition,
            "permission_denied" => ProblemCode::PermissionDenied,
            "unavailable" => ProblemCode::Unavailable,
            "unimplemented" => ProblemCode::NotImplemented,
            // A namespace's quota (the store refused the bridge's write), or the bridge's own
            // rate limits: the caller may retry later, it is not our failure.
            "resource_exhausted" => ProblemCode::ResourceExhausted,
            _ => ProblemCode::Internal,
        },
    };
    let detail = match e {
        ClientError::Transport { .. } | ClientError::Protocol { .. } => format!(
            "{what}: the bridge is not reachable ({e}); stored sessions, runs and streams still work"
        ),
        // The bridge repeats the code at the start of its message: say it once.
        ClientError::Status { code, message } => {
            let message = message
                .strip_prefix(&format!("[{code}] "))
                .unwrap_or(message);
            format!("{what}: the bridge answered: [{code}] {message}")
        }
    };
    Problem::new(code, detail)
}
