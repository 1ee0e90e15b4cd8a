//! Connect error codes: their wire names and the HTTP status each one travels with.

use http::StatusCode;

/// A Connect error code (the gRPC status codes, spelled the Connect way on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    Canceled,
    Unknown,
    InvalidArgument,
    DeadlineExceeded,
    NotFound,
    AlreadyExists,
    PermissionDenied,
    ResourceExhausted,
    FailedPrecondition,
    Aborted,
    OutOfRange,
    Unimplemented,
    Internal,
    Unavailable,
    DataLoss,
    Unauthenticated,
}

impl Code {
    /// The code's name in a Connect error body (`"invalid_argument"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Canceled => "canceled",
            Code::Unknown => "unknown",
            Code::InvalidArgument => "invalid_argument",
            Code::DeadlineExceeded => "deadline_exceeded",
            Code::NotFound => "not_found",
            Code::AlreadyExists => "already_exists",
            Code::PermissionDenied => "permission_denied",
            Code::ResourceExhausted => "resource_exhausted",
            Code::FailedPrecondition => "failed_precondition",
            Code::Aborted => "aborted",
            Code::OutOfRange => "out_of_range",
            Code::Unimplemented => "unimplemented",
            Code::Internal => "internal",
            Code::Unavailable => "unavailable",
            Code::DataLoss => "data_loss",
            Code::Unauthenticated => "unauthenticated",
        }
    }

    /// The HTTP status a unary error with this code is sent with (Connect protocol table).
    pub fn http_status(self) -> StatusCode {
        match self {
            Code::Canceled => StatusCode::from_u16(499).expect("499 is a valid status"),
            Code::Unknown | Code::Internal | Code::DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
            Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => {
                StatusCode::BAD_REQUEST
            }
            Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
            Code::NotFound => StatusCode::NOT_FOUND,
            Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
            Code::PermissionDenied => StatusCode::FORBIDDEN,
            Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
            Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
            Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        }
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Code::{self, *};

    #[test]
    fn every_code_has_the_connect_name_and_status() {
        let table: [(Code, &str, u16); 16] = [
            (Canceled, "canceled", 499),
            (Unknown, "unknown", 500),
            (InvalidArgument, "invalid_argument", 400),
            (DeadlineExceeded, "deadline_exceeded", 504),
            (NotFound, "not_found", 404),
            (AlreadyExists, "already_exists", 409),
            (PermissionDenied, "permission_denied", 403),
            (ResourceExhausted, "resource_exhausted", 429),
            (FailedPrecondition, "failed_precondition", 400),
            (Aborted, "aborted", 409),
            (OutOfRange, "out_of_range", 400),
            (Unimplemented, "unimplemented", 501),
            (Internal, "internal", 500),
            (Unavailable, "unavailable", 503),
            (DataLoss, "data_loss", 500),
            (Unauthenticated, "unauthenticated", 401),
        ];
        for (code, name, status) in table {
            assert_eq!(code.as_str(), name);
            assert_eq!(code.http_status().as_u16(), status, "{name}");
        }
    }
}
