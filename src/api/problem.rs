//! [`Problem`] as an HTTP answer: `application/problem+json` with the status of its code,
//! and the problem of a store error. The document itself, and the problem of a failed run,
//! are the run's account's ([`crate::account::Problem`]).

use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue, StatusCode};

use crate::account::ReadError;
pub use crate::account::{run_problem, Problem, ProblemCode};
use crate::store::StoreError;

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(self.code.status());
        let body = serde_json::to_string(&self).unwrap_or_else(|_| "{}".into());
        let mut response = (status, body).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        response
    }
}

impl From<StoreError> for Problem {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Invalid(m) => Problem::invalid(m),
            StoreError::NotFound(m) => Problem::not_found(m),
            StoreError::Unavailable(m) => Problem::new(ProblemCode::Unavailable, m),
            other => {
                tracing::error!(error = %other, "store error in the run API");
                Problem::internal("internal store error (details in the callbackd log)")
            }
        }
    }
}

impl From<ReadError> for Problem {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Store(e) => e.into(),
            ReadError::Stored(m) => Problem::internal(m),
        }
    }
}
