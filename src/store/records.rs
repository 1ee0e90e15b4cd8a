//! [`RunRecords`]: what callbackd keeps beside the bridge's own records for the run API —
//! its record of every custom tool call it ran, the per-event facts a stream sends that the
//! bridge does not store, and retention — as a trait each backend implements.

use serde::Serialize;

use super::{BoxFuture, Namespace, StoreError};

/// How a tool call ended, as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolOutcome {
    /// Held for a person's decision; it has not started.
    Awaiting,
    /// Still running (or, after a restart, see [`ToolOutcome::Interrupted`]).
    Running,
    /// A person denied it: it never ran.
    Denied,
    /// Nobody decided in time: it never ran.
    Expired,
    Ok,
    /// The tool ran (or was refused its arguments) and answered an error result.
    Error,
    /// Stopped at its time limit.
    Timeout,
    /// Its connection was dropped by the bridge mid-call.
    Cancelled,
    /// The daemon stopped while it ran.
    Interrupted,
}

impl ToolOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolOutcome::Awaiting => "awaiting",
            ToolOutcome::Running => "running",
            ToolOutcome::Denied => "denied",
            ToolOutcome::Expired => "expired",
            ToolOutcome::Ok => "ok",
            ToolOutcome::Error => "error",
            ToolOutcome::Timeout => "timeout",
            ToolOutcome::Cancelled => "cancelled",
            ToolOutcome::Interrupted => "interrupted",
        }
    }

    pub fn parse(s: &str) -> ToolOutcome {
        match s {
            "ok" => ToolOutcome::Ok,
            "awaiting" => ToolOutcome::Awaiting,
            "denied" => ToolOutcome::Denied,
            "expired" => ToolOutcome::Expired,
            "error" => ToolOutcome::Error,
            "timeout" => ToolOutcome::Timeout,
            "cancelled" => ToolOutcome::Cancelled,
            "interrupted" => ToolOutcome::Interrupted,
            _ => ToolOutcome::Running,
        }
    }
}

/// A tool call as it starts.
#[derive(Debug, Clone)]
pub struct ToolCallStart {
    pub agent_id: String,
    /// The agent's active run when the call arrived.
    pub run_id: Option<String>,
    pub tool_call_id: Option<String>,
    pub tool: String,
    pub started_at_ms: i64,
}

/// One recorded tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallRecord {
    pub agent_id: String,
    pub run_id: Option<String>,
    pub tool_call_id: Option<String>,
    pub tool: String,
    pub started_at_ms: i64,
    pub ended_at_ms: Option<i64>,
    pub outcome: ToolOutcome,
    /// Stopped mid-execution: its effect is unknown.
    pub cut_off: bool,
    /// Held for approval: how long it waited for the person (ms); `None` if never held.
    pub waited_ms: Option<i64>,
    /// What the tool ran with, when a person changed the model's arguments (an edited
    /// approval, an answered question); `None`: the model's own.
    pub arguments: Option<serde_json::Value>,
    /// What the tool returned, its own JSON (`{"error": ...}` when it failed or never ran);
    /// `None` while it runs, and for calls recorded before migration 0009.
    pub result: Option<serde_json::Value>,
}

/// What a prune removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PruneReport {
    pub runs: u64,
    pub events: u64,
}

/// What a prune would remove (`callbackd prune --dry-run`, and its confirmation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrunePreview {
    /// Terminal runs that ended long enough ago and still have events.
    pub runs: u64,
    pub events: u64,
    /// The events' payload bytes (the rows take somewhat more).
    pub bytes: u64,
}

/// What one namespace holds (`callbackd namespaces`, the quota gate, metrics).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct NamespaceUsage {
    pub namespace: String,
    pub agents: u64,
    pub runs: u64,
    pub events: u64,
    pub checkpoints: u64,
    pub memory_notes: u64,
    /// Bytes of documents, event payloads, checkpoint blobs and notes (not of indexes).
    pub stored_bytes: u64,
}

/// The usage query of both backends: one row per namespace. `len` gives the byte length of a
/// text column (`length(CAST(x AS BLOB))` in SQLite, `octet_length(x)` in PostgreSQL),
/// `filter` is an optional `WHERE ns = ?`, and `cast` follows each total (PostgreSQL's SUM
/// of bigint is numeric: `::int8` brings it back; SQLite needs none).
pub(crate) fn usage_sql(len: &dyn Fn(&str) -> String, filter: &str, cast: &str) -> String {
    format!(
        "SELECT ns, SUM(a){cast}, SUM(r){cast}, SUM(e){cast}, SUM(c){cast}, SUM(n){cast}, \
         SUM(b){cast} FROM ( \
         SELECT ns, COUNT(*) AS a, 0 AS r, 0 AS e, 0 AS c, 0 AS n, SUM({}) AS b FROM agents {filter} GROUP BY ns \
         UNION ALL SELECT ns, 0, COUNT(*), 0, 0, 0, SUM({}) FROM runs {filter} GROUP BY ns \
         UNION ALL SELECT ns, 0, 0, COUNT(*), 0, 0, SUM({} + {}) FROM run_events {filter} GROUP BY ns \
         UNION ALL SELECT ns, 0, 0, 0, COUNT(*), 0, SUM(length(data)) FROM checkpoints {filter} GROUP BY ns \
         UNION ALL SELECT ns, 0, 0, 0, 0, COUNT(*), SUM({} + {}) FROM memory_notes {filter} GROUP BY ns \
         ) AS u GROUP BY ns ORDER BY ns",
        len("doc"),
        len("doc"),
        len("payload"),
        len("event_type"),
        len("value"),
        len("key"),
    )
}

pub trait RunRecords: Send + Sync + 'static {
    /// A page of agent documents matching `q`, newest first (`{"items", "nextCursor"}`).
    fn find_sessions(
        &self,
        ns: &Namespace,
        q: crate::store::find::SessionQuery,
    ) -> BoxFuture<'_, Result<String, StoreError>>;

    /// A page of run documents matching `q`, newest first (`{"items", "nextCursor"}`).
    fn find_runs(
        &self,
        ns: &Namespace,
        q: crate::store::find::RunQuery,
    ) -> BoxFuture<'_, Result<String, StoreError>>;

    /// What each namespace holds (only `ns`, when given); namespaces with no rows are left
    /// out. A scan of every row of the namespace: for commands, metrics and the quota gate's
    /// periodic refresh, never per call.
    fn usage(
        &self,
        ns: Option<&Namespace>,
    ) -> BoxFuture<'_, Result<Vec<NamespaceUsage>, StoreError>>;

    /// How many agents `ns` has (an index count; the `max_agents` quota).
    fn agent_count(&self, ns: &Namespace) -> BoxFuture<'_, Result<u64, StoreError>>;

    /// Records a starting tool call; returns its record id.
    /// Records a starting tool call (`held`: waiting for approval first); returns its id.
    fn tool_call_started(
        &self,
        ns: &Namespace,
        call: ToolCallStart,
        held: bool,
    ) -> BoxFuture<'_, Result<i64, StoreError>>;

    /// A held call (recorded [`ToolOutcome::Awaiting`]) was approved and starts now, with
    /// `arguments` when a person changed them.
    fn tool_call_resumed(
        &self,
        id: i64,
        arguments: Option<serde_json::Value>,
    ) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Records how call `id` ended, and what the tool returned (its own JSON).
    fn tool_call_ended(
        &self,
        id: i64,
        outcome: ToolOutcome,
        cut_off: bool,
        ended_at_ms: i64,
        result: Option<serde_json::Value>,
    ) -> BoxFuture<'_, Result<(), StoreError>>;

    /// The run's tool calls, oldest first.
    fn tool_calls_of_run(
        &self,
        ns: &Namespace,
        run_id: &str,
    ) -> BoxFuture<'_, Result<Vec<ToolCallRecord>, StoreError>>;

    /// The token count recorded beside snapshot event `seq`; records `new` first when none
    /// is recorded and `new` is given. The first value recorded wins, so every stream and
    /// every replay sends the same one.
    fn snapshot_delta(
        &self,
        ns: &Namespace,
        run_id: &str,
        seq: u64,
        new: Option<u32>,
    ) -> BoxFuture<'_, Result<u32, StoreError>>;

    /// Records the user message that started run `run_id` (through the run API, or found in
    /// its stored `user` event). The first one recorded wins; an empty text records that the
    /// run has none (so that a text found later is not told to a replay).
    fn set_run_input(
        &self,
        ns: &Namespace,
        run_id: &str,
        text: &str,
    ) -> BoxFuture<'_, Result<(), StoreError>>;

    /// The record of `run_id`'s user message as kept, `Some("")` for a run recorded with
    /// none: whether its input is settled ([`set_run_input`](Self::set_run_input)).
    fn run_input_record(
        &self,
        ns: &Namespace,
        run_id: &str,
    ) -> BoxFuture<'_, Result<Option<String>, StoreError>>;

    /// The document of the agent's latest run (the last in `runs.list`'s order), in one
    /// indexed read; `None` when it has no run.
    fn latest_run(
        &self,
        ns: &Namespace,
        agent_id: &str,
    ) -> BoxFuture<'_, Result<Option<String>, StoreError>>;

    /// The user message recorded for each of `run_ids` that has one (not for a run recorded
    /// with none).
    fn run_inputs(
        &self,
        ns: &Namespace,
        run_ids: &[String],
    ) -> BoxFuture<'_, Result<std::collections::HashMap<String, String>, StoreError>>;

    /// The run's last stored seq and up to which seq retention removed its events.
    fn run_positions(
        &self,
        ns: &Namespace,
        run_id: &str,
    ) -> BoxFuture<'_, Result<RunPositions, StoreError>>;

    /// [`RunRecords::run_positions`] of several runs in one store call; a run missing from
    /// the map has none stored (zero positions).
    fn runs_positions(
        &self,
        ns: &Namespace,
        run_ids: &[String],
    ) -> BoxFuture<'_, Result<std::collections::HashMap<String, RunPositions>, StoreError>>;

    /// The last stored event of each run of `run_ids` (its event document, as
    /// `runEvents.list` gives it), in one store call; runs with none are missing.
    fn last_events(
        &self,
        ns: &Namespace,
        run_ids: &[String],
    ) -> BoxFuture<'_, Result<std::collections::HashMap<String, String>, StoreError>>;

    /// Removes the events of up to `batch` terminal runs (of every namespace) that ended
    /// before `ended_before_ms`, in one transaction, remembering how far each run's events
    /// went; then gives the freed pages back to the file system where the backend can.
    /// Call repeatedly until it removes nothing.
    fn prune_batch(
        &self,
        ended_before_ms: i64,
        batch: usize,
    ) -> BoxFuture<'_, Result<PruneReport, StoreError>>;

    /// What [`prune_batch`](Self::prune_batch) would remove, in every batch together, for
    /// the same `ended_before_ms`; changes nothing.
    fn prune_preview(
        &self,
        ended_before_ms: i64,
    ) -> BoxFuture<'_, Result<PrunePreview, StoreError>>;

    /// At start: calls left `running` by a daemon that stopped are interrupted (cut off);
    /// calls left awaiting approval are cancelled (they never ran).
    fn interrupt_running_tool_calls(&self) -> BoxFuture<'_, Result<u64, StoreError>>;
}

/// Where a run's event log stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunPositions {
    /// The largest stored seq, or the expired one when every event was removed; 0 if none.
    pub last_seq: u64,
    /// Events up to this seq were removed by retention; 0 when none were.
    pub expired_through: u64,
}

impl RunPositions {
    /// From what a backend reads: the run's largest stored seq and its retention mark
    /// (`None` when there is none).
    pub fn from_stored(max_seq: Option<i64>, expired_through: Option<i64>) -> Self {
        let expired = expired_through.unwrap_or(0).max(0) as u64;
        RunPositions {
            last_seq: (max_seq.unwrap_or(0).max(0) as u64).max(expired),
            expired_through: expired,
        }
    }
}
