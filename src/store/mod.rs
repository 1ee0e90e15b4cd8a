//! The agent state store: the contract's four substores (`agents`, `runs`, `runEvents`,
//! `checkpoints`) as typed calls ([`StoreCall`]) behind one trait ([`Store`]), and the
//! built-in tools' data behind another ([`ToolData`]). [`backend`] opens the configured
//! backend; [`sqlite::SqliteStore`] is one.
//!
//! What every backend shares lives here, not in a backend: the parsed calls ([`call`]),
//! documents as JSON text ([`json`]), the output shapes (list pages in [`page`], event
//! documents in [`event_doc`], checkpoint blobs in [`blob`]) and the list cursors
//! ([`cursor`]). A backend only stores and selects.

pub mod approvals;
pub mod backend;
pub mod blob;
mod call;
pub mod check;
mod cursor;
pub mod dump;
mod error;
pub mod event_doc;
pub mod find;
pub mod forks;
pub mod json;
mod notices;
pub mod outbox;
pub mod page;
pub mod postgres;
pub mod records;
pub mod sql;
pub mod sqlite;
pub mod threads;
pub mod tool_data;
pub mod transfer;

pub use call::{
    AgentDoc, AgentFilter, CheckpointFilter, NewEvent, Page, RunDoc, RunFilter, StoreCall,
    DEFAULT_CATALOG_LIMIT, DEFAULT_EVENTS_LIMIT,
};
pub use cursor::{AgentCursor, RunCursor};
pub use error::StoreError;
pub use json::JsonText;
pub use notices::{Listener, Notices};
pub use records::RunRecords;
pub use tool_data::ToolData;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::broadcast;

/// What a store call answers: `None` is the contract's "unset output" (a get that missed, a
/// delete, a checkpoint write); `Some` is the output object as JSON text, written by the
/// shared output modules around stored [`JsonText`].
pub type StoreOutput = Option<String>;

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

    /// A namespace name as a user writes one (config, `--namespace`): 1 to 63 of `a-z`,
    /// `0-9`, `-` and `_`, starting with a letter or digit. Names become metric labels and
    /// appear in file names and logs, so nothing that needs quoting is allowed. The error
    /// says what is wrong with this name, then the rule.
    pub fn parse(name: &str) -> Result<Namespace, String> {
        const RULE: &str = "a namespace name is 1 to 63 characters of a-z, 0-9, '-' and '_', \
                            starting with a letter or a digit";
        let Some(first) = name.chars().next() else {
            return Err(format!("the name is empty; {RULE}"));
        };
        if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
            return Err(format!("the name starts with {first:?}; {RULE}"));
        }
        if let Some(bad) = name
            .chars()
            .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '_'))
        {
            return Err(format!("the name contains {bad:?}; {RULE}"));
        }
        // Only ASCII from here on: bytes are characters.
        if name.len() > 63 {
            return Err(format!(
                "the name is {} characters long; {RULE}",
                name.len()
            ));
        }
        Ok(Namespace::new(name))
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

/// What live followers receive from [`Store::subscribe`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreNotice {
    /// An append this daemon committed.
    Appended(EventAppended),
    /// An append another daemon on the same database committed (PostgreSQL).
    Remote(EventAppended),
    /// Notices may have been missed (on PostgreSQL: the connection that hears other
    /// daemons' appends was lost and is back). A follower treats it like a lagged receiver:
    /// it re-reads every run it follows from the last offset it has seen, since appends
    /// made meanwhile may never be announced. Followers should also re-read on a slow timer
    /// of their own, so that no wake-up is ever lost for good.
    Resync,
    /// Another daemon on the same database changed approval `id` (decided or cancelled it;
    /// PostgreSQL): the daemon holding its call re-reads it (`approvals::wake`).
    ApprovalChanged { ns: Namespace, id: String },
    /// This daemon committed the `runs.update` that ended run `run_id`: its document went
    /// from a status that is not terminal (or none) to `status`, which is. Sent once per
    /// run's end (a terminal document written again is not a new end); the daemon's
    /// listeners (`app`) cancel the run's pending approvals, trace it and count it.
    RunEnded {
        ns: Namespace,
        run_id: String,
        status: crate::run::RunStatus,
    },
}

/// A backend for the store substores. Every backend answers every call with the same
/// output, byte for byte, and the same errors (tests/api runs against each).
pub trait Store: Send + Sync + 'static {
    /// Runs one store call. A write is acknowledged (the future resolves `Ok`) only once it
    /// is committed. Lists are cut to the backend's largest page ([`StoreCall::clamp`]).
    fn call(
        &self,
        ns: &Namespace,
        call: StoreCall,
    ) -> BoxFuture<'_, Result<StoreOutput, StoreError>>;

    /// Notifications of committed appends, for receivers that read at their own pace
    /// (metrics, tests; what must react at once listens, [`Store::listen`]). A
    /// [`broadcast::error::RecvError::Lagged`] and a [`StoreNotice::Resync`] both mean
    /// "re-read what you follow".
    fn subscribe(&self) -> broadcast::Receiver<StoreNotice>;

    /// Calls `listener` with every notice from now on, right where it happens (after the
    /// commit, on the committing thread); it must not block ([`Notices`]).
    fn listen(&self, listener: Listener);

    /// The built-in tools' data, kept by the same backend.
    fn tool_data(&self) -> &dyn ToolData;

    /// The run API's records, kept by the same backend.
    fn run_records(self: Arc<Self>) -> Arc<dyn RunRecords>;

    /// The approvals of held tool calls, kept by the same backend.
    fn approval_records(self: Arc<Self>) -> Arc<dyn approvals::ApprovalRecords>;

    /// Where forked sessions came from, kept by the same backend.
    fn fork_records(self: Arc<Self>) -> Arc<dyn forks::ForkRecords>;

    /// Which session each AG-UI thread is, kept by the same backend.
    fn thread_records(self: Arc<Self>) -> Arc<dyn threads::ThreadRecords>;
    /// The webhooks' outbox, kept by the same backend.
    fn outbox_records(self: Arc<Self>) -> Arc<dyn outbox::OutboxRecords>;

    /// From now on every write that did something a webhook tells (an approval held or
    /// resolved, a run's end) records `composer`'s deliveries in its own transaction.
    fn set_outbox(&self, composer: Arc<dyn outbox::Composer>);
}

/// The [`Store`] methods that hand out the backend as each of its record stores: every
/// backend implements them all on its own type, so they are written once. Invoked inside a
/// backend's `impl Store`.
macro_rules! record_stores {
    () => {
        fn tool_data(&self) -> &dyn $crate::store::ToolData {
            self
        }

        fn run_records(
            self: std::sync::Arc<Self>,
        ) -> std::sync::Arc<dyn $crate::store::RunRecords> {
            self
        }

        fn approval_records(
            self: std::sync::Arc<Self>,
        ) -> std::sync::Arc<dyn $crate::store::approvals::ApprovalRecords> {
            self
        }

        fn fork_records(
            self: std::sync::Arc<Self>,
        ) -> std::sync::Arc<dyn $crate::store::forks::ForkRecords> {
            self
        }

        fn thread_records(
            self: std::sync::Arc<Self>,
        ) -> std::sync::Arc<dyn $crate::store::threads::ThreadRecords> {
            self
        }
        fn outbox_records(
            self: std::sync::Arc<Self>,
        ) -> std::sync::Arc<dyn $crate::store::outbox::OutboxRecords> {
            self
        }

        fn set_outbox(&self, composer: std::sync::Arc<dyn $crate::store::outbox::Composer>) {
            self.notices().set_outbox(composer);
        }
    };
}
pub(crate) use record_stores;

#[cfg(test)]
mod tests {
    use super::Namespace;

    #[test]
    fn namespace_names_follow_the_rule() {
        for good in ["default", "a", "0", "alice-2", "team_x", &"a".repeat(63)] {
            assert_eq!(Namespace::parse(good).unwrap().as_str(), good);
        }
        for (bad, why) in [
            ("", "empty"),
            (&"a".repeat(64) as &str, "64 characters"),
            ("-a", "starts with '-'"),
            ("_a", "starts with '_'"),
            ("Alice", "starts with 'A'"),
            ("al ice", "contains ' '"),
            ("a/b", "contains '/'"),
            ("ns.1", "contains '.'"),
            ("é", "starts with 'é'"),
            ("aé", "contains 'é'"),
        ] {
            let err = Namespace::parse(bad).unwrap_err();
            assert!(
                err.contains(why) && err.contains("1 to 63"),
                "{bad:?}: {err}"
            );
        }
    }
}
