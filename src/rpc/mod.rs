//! The two callback RPCs, where the Connect protocol meets the store and the tools. Their
//! routes are in the daemon's one route table (`app::router`).

mod call_log;
pub mod codec;
mod run_log;
pub mod store;
pub(crate) mod tools;
mod unknown_field;

pub use run_log::RunEventHook;

use std::sync::Arc;

use crate::connect::{Code, ConnectError, UnaryLimits};
use crate::store::{Store, StoreError};

pub const STORE_PATH: &str = "/sdk.v1.SdkStoreCallbackService/CallStore";
pub const TOOL_PATH: &str = "/sdk.v1.SdkCustomToolCallbackService/CallCustomTool";

/// What the handlers share.
#[derive(Clone)]
pub struct RpcState {
    pub store: Arc<dyn Store>,
    /// Serves the tool RPC's calls.
    pub tool_calls: crate::tool_calls::ToolCalls,
    pub limits: UnaryLimits,
    pub metrics: crate::metrics::Metrics,
    /// The namespaces' quotas, checked before each store write.
    pub quotas: crate::namespaces::quota::QuotaGate,
    /// Told of each committed append, with its event document (the traces build runs'
    /// spans of them as they come).
    pub run_event: Option<run_log::RunEventHook>,
    /// The runs of a supervised bridge (`callbackd run`), noted as they start and end.
    pub bridge_runs: crate::bridge::BridgeRuns,
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
