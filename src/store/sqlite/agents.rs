//! SQL of the `agents` substore.

use rusqlite::{params, Connection, OptionalExtension};

use super::{cascade, is_constraint, sql_list, Conditions, Keyset};
use crate::store::{AgentCursor, AgentDoc, AgentFilter, Page, StoreError, StoreOutput};

pub fn get(conn: &Connection, ns: &str, agent_id: &str) -> Result<StoreOutput, StoreError> {
    let mut stmt = conn.prepare_cached("SELECT doc FROM agents WHERE ns = ?1 AND agent_id = ?2")?;
    Ok(stmt
        .query_row(params![ns, agent_id], |r| r.get(0))
        .optional()?)
}

pub fn create(conn: &Connection, ns: &str, doc: AgentDoc) -> Result<StoreOutput, StoreError> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO agents (ns, agent_id, cwd, updated_at, doc) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    match stmt.execute(params![
        ns,
        doc.agent_id,
        doc.cwd,
        doc.updated_at,
        doc.json.as_str()
    ]) {
        Ok(_) => Ok(Some(doc.json.into_string())),
        Err(e) if is_constraint(&e) => Err(StoreError::AlreadyExists(format!(
            "agent {} already exists",
            doc.agent_id
        ))),
        Err(e) => Err(e.into()),
    }
}

/// Whole-document replace (the bridge spreads the previous document into every update).
pub fn update(conn: &Connection, ns: &str, doc: AgentDoc) -> Result<StoreOutput, StoreError> {
    let mut stmt = conn.prepare_cached(
        "UPDATE agents SET cwd = ?3, updated_at = ?4, doc = ?5 WHERE ns = ?1 AND agent_id = ?2",
    )?;
    if stmt.execute(params![
        ns,
        doc.agent_id,
        doc.cwd,
        doc.updated_at,
        doc.json.as_str()
    ])? == 0
    {
        return Err(StoreError::NotFound(format!(
            "agent {} not found",
            doc.agent_id
        )));
    }
    Ok(Some(doc.json.into_string()))
}

/// Deletes the matching agents and everything that belongs to them (runs, their events,
/// checkpoints, memory notes). Idempotent: no match is not an error (contract §2.6
/// recommendation; the bridge deletes each substore explicitly anyway).
pub fn delete(
    conn: &Connection,
    ns: &str,
    filter: &AgentFilter,
) -> Result<StoreOutput, StoreError> {
    let mut c = Conditions::new(ns);
    c.in_list("agent_id", filter.agent_ids.as_deref());
    if let Some(cwd) = &filter.cwd {
        c.eq("cwd", cwd);
    }
    let ids: Vec<String> = {
        let mut stmt =
            conn.prepare_cached(&format!("SELECT agent_id FROM agents WHERE {}", c.sql()))?;
        let rows = stmt.query_map(rusqlite::params_from_iter(c.params()), |r| r.get(0))?;
        rows.collect::<Result<_, _>>()?
    };
    if ids.is_empty() {
        return Ok(None);
    }
    let ids = sql_list(&ids);
    cascade::delete_agents(conn, ns, &ids)?;
    Ok(None)
}

/// `updatedAt` desc, `agentId` desc; the cursor holds the last item's pair.
pub fn list(
    conn: &Connection,
    ns: &str,
    filter: &AgentFilter,
    page: &Page<AgentCursor>,
) -> Result<StoreOutput, StoreError> {
    let mut c = Conditions::new(ns);
    if let Some(cwd) = &filter.cwd {
        c.eq("cwd", cwd);
    }
    c.in_list("agent_id", filter.agent_ids.as_deref());
    const ORDER: Keyset = Keyset {
        table: "agents",
        number: "updated_at",
        id: "agent_id",
        descending: true,
    };
    let after = page
        .cursor
        .as_ref()
        .map(|k| (k.updated_at, k.agent_id.as_str()));
    let out = ORDER.page(conn, c, after, page.limit, |updated_at, agent_id| {
        AgentCursor {
            updated_at,
            agent_id,
        }
        .encode()
    })?;
    Ok(Some(out))
}
