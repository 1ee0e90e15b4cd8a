//! [`ForkRecords`]: where each forked session came from (`POST /v1/sessions/{id}/fork`), as
//! a trait both backends implement with the SQL of `store::sql::forks`. The
//! fork's documents and blobs themselves are ordinary store rows of the new agent; this is
//! only the note beside them, which goes with the fork and never with its source.

use super::{BoxFuture, Namespace, StoreError};

/// A fork as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForkRecord {
    /// The fork's agent id.
    pub agent_id: String,
    pub source_agent_id: String,
    pub source_run_id: String,
    /// `after` or `before` the source run.
    pub at: String,
    /// The source's model, which the fork keeps until it has runs of its own.
    pub model: String,
    /// The tool names declared for the fork.
    pub tools: Vec<String>,
    pub created_at_ms: i64,
}

/// The forks of every namespace.
pub trait ForkRecords: Send + Sync + 'static {
    fn insert_fork(&self, ns: &Namespace, rec: ForkRecord)
        -> BoxFuture<'_, Result<(), StoreError>>;

    /// Where `agent_id` was forked from, if it is a fork.
    fn fork_of(
        &self,
        ns: &Namespace,
        agent_id: &str,
    ) -> BoxFuture<'_, Result<Option<ForkRecord>, StoreError>>;

    /// The forks made from a session, oldest first.
    fn forks_from(
        &self,
        ns: &Namespace,
        source_agent_id: &str,
    ) -> BoxFuture<'_, Result<Vec<ForkRecord>, StoreError>>;
}

/// The `tools` column's JSON text.
pub(crate) fn tools_json(tools: &[String]) -> String {
    serde_json::to_string(tools).unwrap_or_else(|_| "[]".into())
}

pub(crate) fn tools_of(json: &str) -> Vec<String> {
    serde_json::from_str(json).unwrap_or_default()
}
