//! SQL of the `runs` substore.

use rusqlite::{params, Connection, OptionalExtension};

use super::{cascade, is_constraint, Conditions, Keyset};
use crate::store::{Page, RunCursor, RunDoc, RunFilter, StoreError, StoreOutput};

/// The run must match both ids.
pub fn get(
    conn: &Connection,
    ns: &str,
    agent_id: &str,
    run_id: &str,
) -> Result<StoreOutput, StoreError> {
    let mut stmt = conn
        .prepare_cached("SELECT doc FROM runs WHERE ns = ?1 AND agent_id = ?2 AND run_id = ?3")?;
    Ok(stmt
        .query_row(params![ns, agent_id, run_id], |r| r.get(0))
        .optional()?)
}

pub fn create(conn: &Connection, ns: &str, doc: RunDoc) -> Result<StoreOutput, StoreError> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO runs (ns, agent_id, run_id, turn_number, doc) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    match stmt.execute(params![
        ns,
        doc.agent_id,
        doc.run_id,
        doc.turn_number,
        doc.json.as_str()
    ]) {
        Ok(_) => Ok(Some(doc.json.into_string())),
        Err(e) if is_constraint(&e) => Err(StoreError::AlreadyExists(format!(
            "run {} already exists for agent {}",
            doc.run_id, doc.agent_id
        ))),
        Err(e) => Err(e.into()),
    }
}

pub fn update(conn: &Connection, ns: &str, doc: RunDoc) -> Result<StoreOutput, StoreError> {
    let mut stmt = conn.prepare_cached(
        "UPDATE runs SET turn_number = ?4, doc = ?5 WHERE ns = ?1 AND agent_id = ?2 AND run_id = ?3",
    )?;
    if stmt.execute(params![
        ns,
        doc.agent_id,
        doc.run_id,
        doc.turn_number,
        doc.json.as_str()
    ])? == 0
    {
        return Err(StoreError::NotFound(format!(
            "run {} not found for agent {}",
            doc.run_id, doc.agent_id
        )));
    }
    Ok(Some(doc.json.into_string()))
}

/// Deletes the matching runs and their events (JSONL-store semantics). Idempotent.
pub fn delete(conn: &Connection, ns: &str, filter: &RunFilter) -> Result<StoreOutput, StoreError> {
    let c = conditions(ns, filter);
    cascade::delete_runs_where(conn, &c)?;
    Ok(None)
}

/// `turnNumber` asc, `runId` asc; the cursor holds the last item's pair.
pub fn list(
    conn: &Connection,
    ns: &str,
    filter: &RunFilter,
    page: &Page<RunCursor>,
) -> Result<StoreOutput, StoreError> {
    const ORDER: Keyset = Keyset {
        table: "runs",
        number: "turn_number",
        id: "run_id",
        descending: false,
    };
    let after = page
        .cursor
        .as_ref()
        .map(|k| (k.turn_number, k.run_id.as_str()));
    let out = ORDER.page(
        conn,
        conditions(ns, filter),
        after,
        page.limit,
        |turn_number, run_id| {
            RunCursor {
                turn_number,
                run_id,
            }
            .encode()
        },
    )?;
    Ok(Some(out))
}

fn conditions(ns: &str, filter: &RunFilter) -> Conditions {
    let mut c = Conditions::new(ns);
    c.in_list("agent_id", filter.agent_ids.as_deref());
    c.in_list("run_id", filter.run_ids.as_deref());
    c
}
