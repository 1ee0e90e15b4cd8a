//! The webhooks' outbox (migration 0009): deliveries recorded in the same transaction as
//! what caused them, then claimed, attempted and settled by a delivery worker
//! (`webhooks::deliver`). Both backends implement [`OutboxRecords`] with the one SQL of
//! [`sql::outbox`](super::sql::outbox).
//!
//! The store does not know what a webhook says: a [`Composer`] set by the daemon
//! ([`Store::set_outbox`](super::Store::set_outbox)) turns what a write did (a
//! [`Happening`]) into rows, and the backend inserts them inside that write's transaction.
//! Ids are the composer's: it derives them from the event, so a write repeated (a run's end
//! written twice, a transaction retried) records the event once.

use super::approvals::ApprovalRecord;
use super::{BoxFuture, Namespace, StoreError};

/// What a store write did that a webhook may tell.
#[derive(Debug)]
pub enum Happening<'a> {
    /// A call is held for a person (inserted pending).
    ApprovalRequired(&'a ApprovalRecord),
    /// A held call's approval left `pending` (decided, expired, cancelled): the record after.
    ApprovalResolved(&'a ApprovalRecord),
    /// A `runs.update` was written; the composer reads the status in `doc`.
    RunUpdated {
        ns: &'a Namespace,
        agent_id: &'a str,
        run_id: &'a str,
        doc: &'a str,
    },
}

/// One delivery to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxEntry {
    /// The event's `webhook-id`.
    pub id: String,
    pub url: String,
    pub ns: String,
    /// `approval.required`, `run.ended`, ...
    pub kind: String,
    pub run_id: Option<String>,
    /// The JSON body posted, `{"type", "timestamp", "data"}`.
    pub body: String,
    pub created_at_ms: i64,
}

/// Turns what a write did into the deliveries to record with it. Called inside the write's
/// transaction: it must not block or touch the store.
pub trait Composer: Send + Sync + 'static {
    fn compose(&self, happening: &Happening<'_>) -> Vec<OutboxEntry>;
}

/// A delivery as stored: the entry and how its attempts went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub entry: OutboxEntry,
    /// `pending`, `delivered` or `failed` (given up).
    pub state: String,
    pub attempts: i64,
    /// When the next attempt is due (epoch ms), while pending.
    pub next_at_ms: i64,
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    pub last_at_ms: Option<i64>,
}

/// How an attempt ended, to settle a claimed delivery.
#[derive(Debug, Clone)]
pub struct Settle {
    pub id: String,
    pub url: String,
    pub owner: String,
    /// `pending` (retry at `next_at_ms`), `delivered` or `failed`.
    pub state: &'static str,
    pub next_at_ms: i64,
    pub status: Option<i64>,
    pub error: Option<String>,
    pub at_ms: i64,
}

/// A claim of due deliveries.
#[derive(Debug, Clone)]
pub struct Claim {
    pub owner: String,
    pub now_ms: i64,
    /// Until when the claim holds (epoch ms): past it, another daemon may take the rows.
    pub until_ms: i64,
    /// The endpoints this daemon knows (it has their secrets).
    pub urls: Vec<String>,
    pub limit: i64,
}

/// The outbox of every namespace.
pub trait OutboxRecords: Send + Sync + 'static {
    /// Takes up to `claim.limit` due deliveries for `claim.owner`, oldest due first; no
    /// other daemon gets them until the claim runs out or they are settled.
    fn claim_deliveries(&self, claim: Claim) -> BoxFuture<'_, Result<Vec<Delivery>, StoreError>>;

    /// Records an attempt's end; `false` when the claim was lost meanwhile (nothing changed).
    fn settle_delivery(&self, settle: Settle) -> BoxFuture<'_, Result<bool, StoreError>>;

    /// The namespace's deliveries, newest first, in `state` if given, at most `limit`.
    fn deliveries(
        &self,
        ns: &Namespace,
        state: Option<&str>,
        limit: i64,
    ) -> BoxFuture<'_, Result<Vec<Delivery>, StoreError>>;

    /// Deliveries waiting for an attempt, every namespace (the pending gauge).
    fn pending_deliveries(&self) -> BoxFuture<'_, Result<i64, StoreError>>;

    /// Removes settled deliveries created before `before_ms`; how many.
    fn prune_deliveries(&self, before_ms: i64) -> BoxFuture<'_, Result<u64, StoreError>>;
}
