//! Deletes that reach across substores, kept in one place so every path removes the same
//! rows: an agent takes its runs, their events, its checkpoints, its memory notes and its
//! tool call records with it; a run takes its events. The run API's notes beside a run's
//! events (`event_meta`, `run_expiry`) go with the events.

use rusqlite::{params, Connection};

use super::Conditions;
use crate::store::StoreError;

/// The tables keyed by `(ns, run_id)` that go with a run's events.
pub const EVENT_TABLES: [&str; 3] = ["run_events", "event_meta", "run_expiry"];

/// `ids` is a JSON array of agent ids.
pub fn delete_agents(conn: &Connection, ns: &str, ids: &str) -> Result<(), StoreError> {
    const IN_AGENTS: &str = "agent_id IN (SELECT value FROM json_each(?2))";
    for table in EVENT_TABLES {
        conn.prepare_cached(&format!(
            "DELETE FROM {table} WHERE ns = ?1 AND run_id IN \
             (SELECT run_id FROM runs WHERE ns = ?1 AND {IN_AGENTS})"
        ))?
        .execute(params![ns, ids])?;
    }
    for table in [
        "runs",
        "checkpoints",
        "memory_notes",
        "tool_calls",
        "approvals",
        "session_forks",
        "agents",
    ] {
        conn.prepare_cached(&format!(
            "DELETE FROM {table} WHERE ns = ?1 AND {IN_AGENTS}"
        ))?
        .execute(params![ns, ids])?;
    }
    Ok(())
}

/// Deletes the runs matching `c` (conditions on the `runs` table) and their events.
pub fn delete_runs_where(conn: &Connection, c: &Conditions) -> Result<(), StoreError> {
    let params = c.params();
    for table in EVENT_TABLES {
        conn.prepare_cached(&format!(
            "DELETE FROM {table} WHERE ns = ? AND run_id IN (SELECT run_id FROM runs WHERE {})",
            c.sql()
        ))?
        .execute(rusqlite::params_from_iter(
            std::iter::once(params[0].clone()).chain(params.iter().cloned()),
        ))?;
    }
    conn.prepare_cached(&format!("DELETE FROM runs WHERE {}", c.sql()))?
        .execute(rusqlite::params_from_iter(params))?;
    Ok(())
}
