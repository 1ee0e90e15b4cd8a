//! SQL of the `agents` substore.

use super::{cascade, sql, Conditions, Exec, Keyset, Value};
use crate::store::{AgentCursor, AgentDoc, AgentFilter, Page, StoreError, StoreOutput};

pub async fn get<X: Exec>(x: &X, ns: &str, agent_id: &str) -> Result<StoreOutput, X::Error> {
    let sql = sql!("SELECT doc FROM agents WHERE ns = ?1 AND agent_id = ?2");
    x.first(
        sql.get(X::DIALECT),
        &[Value::Text(ns), Value::Text(agent_id)],
        |r| Ok(r.text(0)?.to_string()),
    )
    .await
}

pub async fn create<X: Exec>(x: &X, ns: &str, doc: &AgentDoc) -> Result<StoreOutput, X::Error> {
    let sql = sql!(
        "INSERT INTO agents (ns, agent_id, cwd, updated_at, doc) VALUES (?1, ?2, ?3, ?4, ?5)",
        pg: " ON CONFLICT (ns, agent_id) DO NOTHING"
    );
    if !x.insert_new(sql.get(X::DIALECT), &params(ns, doc)).await? {
        return Err(
            StoreError::AlreadyExists(format!("agent {} already exists", doc.agent_id)).into(),
        );
    }
    Ok(Some(doc.json.as_str().to_string()))
}

/// Whole-document replace (the bridge spreads the previous document into every update).
pub async fn update<X: Exec>(x: &X, ns: &str, doc: &AgentDoc) -> Result<StoreOutput, X::Error> {
    let sql = sql!(
        "UPDATE agents SET cwd = ?3, updated_at = ?4, doc = ?5 WHERE ns = ?1 AND agent_id = ?2"
    );
    if x.execute(sql.get(X::DIALECT), &params(ns, doc)).await? == 0 {
        return Err(StoreError::NotFound(format!("agent {} not found", doc.agent_id)).into());
    }
    Ok(Some(doc.json.as_str().to_string()))
}

fn params<'a>(ns: &'a str, doc: &'a AgentDoc) -> [Value<'a>; 5] {
    [
        Value::Text(ns),
        Value::Text(&doc.agent_id),
        Value::Text(&doc.cwd),
        Value::Float(doc.updated_at),
        Value::Text(doc.json.as_str()),
    ]
}

/// Deletes the matching agents and everything that belongs to them (runs, their events,
/// checkpoints, memory notes, tool call records, approvals). Idempotent: no match is not an
/// error (contract §2.6 recommendation; the bridge deletes each substore explicitly anyway).
pub async fn delete<X: Exec>(
    x: &X,
    ns: &str,
    filter: &AgentFilter,
) -> Result<StoreOutput, X::Error> {
    let mut c = Conditions::new(X::DIALECT, ns);
    c.in_list("agent_id", filter.agent_ids.as_deref());
    if let Some(cwd) = &filter.cwd {
        c.eq("cwd", cwd);
    }
    let sql = format!(
        "SELECT agent_id FROM agents WHERE {}{}",
        c.sql(),
        X::DIALECT.for_update()
    );
    let ids = x
        .all(&sql, c.params(), |r| Ok(r.text(0)?.to_string()))
        .await?;
    if ids.is_empty() {
        return Ok(None);
    }
    cascade::delete_agents(x, ns, &ids).await?;
    Ok(None)
}

/// `updatedAt` desc, `agentId` desc; the cursor holds the last item's pair.
pub async fn list<X: Exec>(
    x: &X,
    ns: &str,
    filter: &AgentFilter,
    page: &Page<AgentCursor>,
) -> Result<StoreOutput, X::Error> {
    let mut c = Conditions::new(X::DIALECT, ns);
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
    let out = ORDER
        .page(x, c, after, page.limit, |updated_at, agent_id| {
            AgentCursor {
                updated_at,
                agent_id,
            }
            .encode()
        })
        .await?;
    Ok(Some(out))
}
