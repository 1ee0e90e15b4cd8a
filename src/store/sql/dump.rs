//! The read-out of `callbackd export`, written once for both backends: its statements, in
//! the order both read them (agents by id, runs by agent and id, events by run and seq,
//! blobs by agent and id; ids compare bytewise), and how a row becomes the record handed
//! to the sink, so an export of the same data is the same bytes from either backend. How
//! the rows arrive stays with each backend: SQLite steps one read transaction, PostgreSQL
//! streams one `REPEATABLE READ` snapshot (neither holds the store in memory).

use super::{sql, Row, Sql};
use crate::store::dump::{CheckpointRecord, DumpCounts, DumpSink, EventRecord};
use crate::store::json::NotJson;
use crate::store::{AgentDoc, JsonText, RunDoc, StoreError};

/// One statement of a read-out; each takes the namespace as its one parameter.
#[derive(Debug, Clone, Copy)]
pub enum Read {
    Agents,
    Runs,
    Events,
    Checkpoints,
}

impl Read {
    /// Every read, in the order a read-out runs them.
    pub const ALL: [Read; 4] = [Read::Agents, Read::Runs, Read::Events, Read::Checkpoints];

    pub fn sql(self) -> Sql {
        match self {
            Read::Agents => sql!(
                "SELECT agent_id, cwd, updated_at, doc FROM agents WHERE ns = ?1 ORDER BY agent_id"
            ),
            Read::Runs => sql!(
                "SELECT agent_id, run_id, turn_number, doc FROM runs WHERE ns = ?1 \
                 ORDER BY agent_id, run_id"
            ),
            Read::Events => sql!(
                "SELECT run_id, seq, event_type, payload, payload_ref, idempotency_key, \
                 created_at FROM run_events WHERE ns = ?1 ORDER BY run_id, seq"
            ),
            Read::Checkpoints => sql!(
                "SELECT agent_id, blob_id, data FROM checkpoints WHERE ns = ?1 \
                 ORDER BY agent_id, blob_id"
            ),
        }
    }
}

/// Why a row was not handed on.
#[derive(Debug)]
pub enum RowError<E> {
    /// A column that could not be read as its type.
    Row(StoreError),
    /// A stored document or payload (column `column`, described by `what`) that is not JSON.
    NotJson {
        what: String,
        column: usize,
        error: NotJson,
    },
    Sink(E),
}

/// Hands row `r` of `read` to `sink` as its record, and counts it.
pub fn hand_on<S: DumpSink>(
    read: Read,
    r: &dyn Row,
    sink: &mut S,
    counts: &mut DumpCounts,
) -> Result<(), RowError<S::Error>> {
    let text = |i| r.text(i).map(str::to_string).map_err(RowError::Row);
    let opt_text = |i| Ok(r.opt_text(i).map_err(RowError::Row)?.map(str::to_string));
    let json = |column, what: &dyn Fn() -> String| {
        JsonText::parse(text(column)?).map_err(|error| RowError::NotJson {
            what: what(),
            column,
            error,
        })
    };
    match read {
        Read::Agents => {
            let agent_id = text(0)?;
            let json = json(3, &|| format!("the document of agent {agent_id}"))?;
            let doc = AgentDoc {
                cwd: text(1)?,
                updated_at: r.float(2).map_err(RowError::Row)?,
                agent_id,
                json,
            };
            sink.agent(doc).map_err(RowError::Sink)?;
            counts.agents += 1;
        }
        Read::Runs => {
            let run_id = text(1)?;
            let json = json(3, &|| format!("the document of run {run_id}"))?;
            let doc = RunDoc {
                agent_id: text(0)?,
                turn_number: r.float(2).map_err(RowError::Row)?,
                run_id,
                json,
            };
            sink.run(doc).map_err(RowError::Sink)?;
            counts.runs += 1;
        }
        Read::Events => {
            let run_id = text(0)?;
            let seq = r.int(1).map_err(RowError::Row)?;
            let payload = json(3, &|| format!("the payload of event {seq} of run {run_id}"))?;
            let event = EventRecord {
                seq: seq.try_into().unwrap_or(0),
                event_type: text(2)?,
                payload,
                payload_ref: opt_text(4)?,
                idempotency_key: opt_text(5)?,
                created_at_ms: r.int(6).map_err(RowError::Row)?,
                run_id,
            };
            sink.event(event).map_err(RowError::Sink)?;
            counts.events += 1;
        }
        Read::Checkpoints => {
            let blob = CheckpointRecord {
                agent_id: text(0)?,
                blob_id: text(1)?,
                data: r.bytes(2).map_err(RowError::Row)?.to_vec(),
            };
            sink.checkpoint(blob).map_err(RowError::Sink)?;
            counts.checkpoints += 1;
        }
    }
    Ok(())
}
