//! Whole-store records, for moving a namespace's data between stores (`callbackd export`
//! and `import`): what a backend reads out in one consistent snapshot, and loads in one
//! transaction. Ids and documents are as the store keeps them; event numbering is kept.

use super::{AgentDoc, JsonText, RunDoc};

/// One stored run event, with its seq and time.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    pub run_id: String,
    /// 1, 2, ... within the run (the event's `offset` is its decimal string).
    pub seq: u64,
    pub event_type: String,
    /// JSON text; `null` when the event has no payload.
    pub payload: JsonText,
    pub payload_ref: Option<String>,
    pub idempotency_key: Option<String>,
    /// Epoch milliseconds.
    pub created_at_ms: i64,
}

/// One checkpoint blob, as bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointRecord {
    pub agent_id: String,
    pub blob_id: String,
    pub data: Vec<u8>,
}

/// Everything of a namespace, in memory (what an import loads).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dump {
    pub agents: Vec<AgentDoc>,
    pub runs: Vec<RunDoc>,
    pub events: Vec<EventRecord>,
    pub checkpoints: Vec<CheckpointRecord>,
}

/// Where a backend writes the records it reads out, one at a time (an export streams them
/// to files rather than holding the store in memory).
pub trait DumpSink {
    type Error;
    fn agent(&mut self, doc: AgentDoc) -> Result<(), Self::Error>;
    fn run(&mut self, doc: RunDoc) -> Result<(), Self::Error>;
    fn event(&mut self, event: EventRecord) -> Result<(), Self::Error>;
    fn checkpoint(&mut self, blob: CheckpointRecord) -> Result<(), Self::Error>;
}

/// How many records of each kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DumpCounts {
    pub agents: usize,
    pub runs: usize,
    pub events: usize,
    pub checkpoints: usize,
}

impl std::fmt::Display for DumpCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} agents, {} runs, {} run events, {} checkpoint blobs",
            self.agents, self.runs, self.events, self.checkpoints
        )
    }
}
