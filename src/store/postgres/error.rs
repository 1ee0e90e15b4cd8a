//! How PostgreSQL failures become [`StoreError`]s, and which are worth another attempt.

use deadpool_postgres::PoolError;
use tokio_postgres::error::SqlState;

use crate::store::StoreError;

/// A failed attempt at a call.
#[derive(Debug)]
pub enum Fail {
    Db(tokio_postgres::Error),
    Pool(PoolError),
    /// Already decided (not found, already exists, invalid input).
    Store(StoreError),
}

impl From<tokio_postgres::Error> for Fail {
    fn from(e: tokio_postgres::Error) -> Self {
        Fail::Db(e)
    }
}

impl From<PoolError> for Fail {
    fn from(e: PoolError) -> Self {
        Fail::Pool(e)
    }
}

impl From<StoreError> for Fail {
    fn from(e: StoreError) -> Self {
        Fail::Store(e)
    }
}

impl Fail {
    /// A serialization failure or a deadlock: the transaction was rolled back and running
    /// it again is safe and expected to succeed.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Fail::Db(e) if matches!(
            e.code(),
            Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED
        ))
    }

    /// Whether an append failed because another one committed the same idempotency key
    /// first (run it again: it will return that event).
    pub fn is_key_race(&self) -> bool {
        matches!(self, Fail::Db(db) if db.as_db_error().and_then(|d| d.constraint()) == Some("run_events_by_key"))
    }

    pub fn into_store_error(self) -> StoreError {
        match self {
            Fail::Store(e) => e,
            Fail::Pool(e) => pool_error(e),
            Fail::Db(e) => db_error(&e),
        }
    }
}

fn pool_error(e: PoolError) -> StoreError {
    match e {
        PoolError::Backend(e) => db_error(&e),
        PoolError::Timeout(_) => StoreError::Unavailable(
            "no PostgreSQL connection could be had in time (the server is down, unreachable \
             or every connection of store.pool_size is busy)"
                .into(),
        ),
        PoolError::Closed => StoreError::Unavailable("the store is shutting down".into()),
        other => StoreError::Unavailable(format!("no PostgreSQL connection: {other}")),
    }
}

/// The Connect-facing error of a PostgreSQL error.
pub fn db_error(e: &tokio_postgres::Error) -> StoreError {
    let Some(code) = e.code() else {
        // No SQLSTATE: the connection broke (server restarted, network), or a timeout.
        return StoreError::Unavailable(format!("the PostgreSQL connection failed: {e}"));
    };
    let detail = e
        .as_db_error()
        .map_or_else(|| e.to_string(), |d| d.message().to_string());
    let class = &code.code()[..2];
    if *code == SqlState::QUERY_CANCELED {
        StoreError::Unavailable(format!(
            "the database did not answer within store.statement_timeout_ms: {detail}"
        ))
    } else if *code == SqlState::DISK_FULL || class == "53" {
        StoreError::Full(detail)
    } else if *code == SqlState::DATA_CORRUPTED || *code == SqlState::INDEX_CORRUPTED {
        StoreError::DataLoss(format!("the database is corrupted: {detail}"))
    } else if *code == SqlState::CHARACTER_NOT_IN_REPERTOIRE
        || *code == SqlState::UNTRANSLATABLE_CHARACTER
    {
        // A NUL character in an id or type: PostgreSQL text cannot hold it.
        StoreError::Invalid(format!(
            "the input has a character PostgreSQL cannot store (NUL): {detail}"
        ))
    } else if matches!(class, "08" | "57") || *code == SqlState::T_R_SERIALIZATION_FAILURE {
        // Connection exceptions, admin shutdown, "cannot connect now" (a restart), and a
        // conflict that outlived its retries.
        StoreError::Unavailable(format!("the database is unavailable: {detail}"))
    } else if *code == SqlState::T_R_DEADLOCK_DETECTED || class == "40" {
        StoreError::Unavailable(format!("the database rolled the call back: {detail}"))
    } else {
        StoreError::Internal(format!("PostgreSQL error {}: {detail}", code.code()))
    }
}
