//! [`ThreadRecords`]: which session each AG-UI thread is (`POST /v1/ag-ui`). An AG-UI client
//! names its thread before the bridge names the agent, so the thread id is kept as an alias
//! of the agent id; a trait both backends implement with the one SQL of
//! [`sql::threads`](super::sql::threads). The row goes with the agent.

use super::{BoxFuture, Namespace, StoreError};

/// The AG-UI threads of every namespace.
pub trait ThreadRecords: Send + Sync + 'static {
    /// Records `thread_id` as an alias of `agent_id` unless the thread already has one; the
    /// thread's session after the call (the first one recorded wins a race).
    fn claim_thread(
        &self,
        ns: &Namespace,
        thread_id: &str,
        agent_id: &str,
        created_at_ms: i64,
    ) -> BoxFuture<'_, Result<String, StoreError>>;

    /// The session `thread_id` is an alias of, if any.
    fn thread_session(
        &self,
        ns: &Namespace,
        thread_id: &str,
    ) -> BoxFuture<'_, Result<Option<String>, StoreError>>;
}
