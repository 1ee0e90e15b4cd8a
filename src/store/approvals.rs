//! [`ApprovalRecords`]: the held tool calls and their decisions, as a trait each backend
//! implements (the SQLite one is `store::sqlite::approvals`).

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
}

/// The approvals of every namespace.
pub trait ApprovalRecords: Send + Sync + 'static {
    fn insert_approval(&self, rec: ApprovalRecord) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Decides a pending approval; `false` (nothing changed) when it is not pending.
    fn decide_approval(
        &self,
        id: &str,
        state: &'static str,
        by: Option<String>,
        reason: Option<String>,
        at_ms: i64,
    ) -> BoxFuture<'_, Result<bool, StoreError>>;

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

    /// At start: approvals left pending by a daemon that stopped are cancelled.
    fn cancel_pending_approvals(&self, reason: &str) -> BoxFuture<'_, Result<u64, StoreError>>;
}
