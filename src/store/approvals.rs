//! [`ApprovalRecords`]: the held tool calls and their decisions, as a trait both backends
//! implement with the one SQL of `store::sql::approvals`.

use serde_json::Value;

use super::{BoxFuture, Namespace, StoreError};

/// An approval as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRecord {
    pub id: String,
    pub ns: Namespace,
    pub agent_id: String,
    pub run_id: Option<String>,
    pub tool: String,
    pub tool_call_id: Option<String>,
    pub args: Value,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    /// `pending`, `approved`, `denied`, `expired` or `cancelled`.
    pub state: String,
    pub decided_by: Option<String>,
    pub decided_at_ms: Option<i64>,
    pub reason: Option<String>,
    /// The daemon instance whose call waits on it (migration 0004).
    pub owner: String,
    /// Until when (epoch ms) the owner vouches for the call while it is pending.
    pub lease_until_ms: i64,
    /// The arguments a person edited before approving: what the tool ran with.
    pub approved_args: Option<Value>,
    /// The tool is marked `confirm = true` (migration 0007): the console asks twice.
    pub confirm: bool,
}

/// A change of an approval's state, applied only when the approval is in one of `from`.
#[derive(Debug, Clone)]
pub struct ApprovalChange {
    pub ns: Namespace,
    pub id: String,
    pub state: &'static str,
    pub by: Option<String>,
    pub reason: Option<String>,
    pub at_ms: i64,
    pub approved_args: Option<Value>,
    /// The states it may change from: `pending`, and `approved` for an approval whose
    /// call ended before it could run.
    pub from: &'static [&'static str],
}

/// The approvals of every namespace.
pub trait ApprovalRecords: Send + Sync + 'static {
    fn insert_approval(&self, rec: ApprovalRecord) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Applies `change` if the approval is in one of its `from` states, atomically;
    /// `false` (nothing changed) otherwise.
    fn change_approval(&self, change: ApprovalChange) -> BoxFuture<'_, Result<bool, StoreError>>;

    /// Renews the lease of `owner`'s pending approvals until `until_ms`.
    fn renew_approval_leases(
        &self,
        owner: &str,
        until_ms: i64,
    ) -> BoxFuture<'_, Result<u64, StoreError>>;

    fn approval(
        &self,
        ns: &Namespace,
        id: &str,
    ) -> BoxFuture<'_, Result<Option<ApprovalRecord>, StoreError>>;

    /// The namespace's approvals in `state` (every state when `None`), oldest first.
    fn approvals(
        &self,
        ns: &Namespace,
        state: Option<&str>,
    ) -> BoxFuture<'_, Result<Vec<ApprovalRecord>, StoreError>>;

    /// The approvals of run `run_id` (its held calls and questions), oldest first.
    fn approvals_of_run(
        &self,
        ns: &Namespace,
        run_id: &str,
    ) -> BoxFuture<'_, Result<Vec<ApprovalRecord>, StoreError>>;

    /// Pending approvals whose owner's lease ran out before `now_ms` (their daemon is gone,
    /// and its call with it) are cancelled for `reason`; the ids changed, with their
    /// namespaces and runs.
    fn cancel_abandoned_approvals(
        &self,
        reason: &str,
        now_ms: i64,
    ) -> BoxFuture<'_, Result<Vec<ApprovalRecord>, StoreError>>;
}
