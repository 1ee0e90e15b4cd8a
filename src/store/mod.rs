//! The agent state store: the contract's four substores (`agents`, `runs`, `runEvents`,
//! `checkpoints`) as typed calls ([`StoreCall`]) behind one trait ([`Store`]) that a
//! second backend can implement. [`sqlite::SqliteStore`] is the one backend today.
//!
//! Documents travel as JSON text ([`JsonText`]) end to end: what the bridge sent is what is
//! stored and what it reads back, byte for byte, without a parse/serialise round trip.

pub mod approvals;
mod call;
mod cursor;
pub mod dump;
mod error;
pub mod records;
pub mod sqlite;

pub use call::{
    AgentDoc, AgentFilter, CheckpointFilter, NewEvent, Page, RunDoc, RunFilter, StoreCall,
};
pub use cursor::{AgentCursor, RunCursor};
pub use error::StoreError;
pub use records::RunRecords;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::broadcast;

/// Valid JSON text. Store outputs are built from stored documents by concatenation.
pub type JsonText = String;

/// What a store call answers: `None` is the contract's "unset output" (a get that missed, a
/// delete, a checkpoint write); `Some` is the output object as JSON text.
pub type StoreOutput = Option<JsonText>;

/// A boxed future, so that [`Store`] can be used as `dyn Store`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The namespace a request's data lives in, granted by its bearer token. One daemon serving
/// one bridge uses [`Namespace::default`]; the type exists so that several bridges can share a
/// daemon (each token its own namespace) without touching the storage layer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Namespace(Arc<str>);

impl Namespace {
    pub fn new(name: &str) -> Self {
        Namespace(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Namespace {
    fn default() -> Self {
        Namespace::new("default")
    }
}

/// Sent to live followers after a `runEvents.append` has been committed (not for an
/// idempotent repeat). Carries ids only: followers read the event from the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventAppended {
    pub ns: Namespace,
    pub run_id: String,
    pub seq: u64,
}

/// A backend for the store substores.
pub trait Store: Send + Sync + 'static {
    /// Runs one store call. A write is acknowledged (the future resolves `Ok`) only once it
    /// is committed.
    fn call(
        &self,
        ns: &Namespace,
        call: StoreCall,
    ) -> BoxFuture<'_, Result<StoreOutput, StoreError>>;

    /// Notifications of committed appends, for live followers (an SSE stream, tests).
    fn subscribe(&self) -> broadcast::Receiver<EventAppended>;
}
