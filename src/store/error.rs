//! [`StoreError`]: why a store call failed, in terms a client can act on.

/// A store failure. Each variant's doc names the Connect code it is answered with.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The input is malformed (missing field, wrong type, bad cursor or base64):
    /// `invalid_argument`.
    #[error("{0}")]
    Invalid(String),
    /// An update of something that does not exist: `not_found`.
    #[error("{0}")]
    NotFound(String),
    /// A create of something that exists: `already_exists`.
    #[error("{0}")]
    AlreadyExists(String),
    /// The database is out of space: `resource_exhausted`. Nothing was written.
    #[error("the store is out of space: {0}")]
    Full(String),
    /// A namespace's quota would be exceeded (`namespaces::quota`): `resource_exhausted`,
    /// with a message naming the namespace and the quota. Nothing was written.
    #[error("{0}")]
    Quota(String),
    /// Stored bytes no longer match their checksum: `data_loss`.
    #[error("{0}")]
    DataLoss(String),
    /// The store cannot take calls right now (shutting down, writer gone): `unavailable`.
    #[error("{0}")]
    Unavailable(String),
    /// Anything else; the detail is logged, the client gets a short message: `internal`.
    #[error("internal store error: {0}")]
    Internal(String),
}

impl StoreError {
    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        StoreError::Invalid(msg.into())
    }
}
