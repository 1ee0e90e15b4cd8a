//! SQL of the `agents` substore on PostgreSQL.

use tokio_postgres::types::Type;

use super::cascade;
use super::db::{Conditions, Db};
use super::error::Fail;
use super::keyset::Keyset;
use crate::store::{AgentCursor, AgentDoc, AgentFilter, Page, StoreError, StoreOutput};

pub async fn get(db: &Db<'_>, ns: &str, agent_id: &str) -> Result<StoreOutput, Fail> {
    let row = db
        .query_opt(
            "SELECT doc FROM agents WHERE ns = $1 AND agent_id = $2",
            &[(&ns, Type::TEXT), (&agent_id, Type::TEXT)],
        )
        .await?;
    Ok(row.map(|r| r.get(0)))
}

pub async fn create(db: &Db<'_>, ns: &str, doc: &AgentDoc) -> Result<StoreOutput, Fail> {
    // ON CONFLICT DO NOTHING here only tells "exists" from "created" without aborting the
    // transaction; nothing is lost, the call fails with already_exists.
    let n = db
        .execute(
            "INSERT INTO agents (ns, agent_id, cwd, updated_at, doc) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (ns, agent_id) DO NOTHING",
            &[
                (&ns, Type::TEXT),
                (&doc.agent_id, Type::TEXT),
                (&doc.cwd, Type::TEXT),
                (&doc.updated_at, Type::FLOAT8),
                (&doc.json.as_str(), Type::TEXT),
            ],
        )
        .await?;
    if n == 0 {
        return Err(
            StoreError::AlreadyExists(format!("agent {} already exists", doc.agent_id)).into(),
        );
    }
    Ok(Some(doc.json.as_str().to_string()))
}

pub async fn update(db: &Db<'_>, ns: &str, doc: &AgentDoc) -> Result<StoreOutput, Fail> {
    let n = db
        .execute(
            "UPDATE agents SET cwd = $3, updated_at = $4, doc = $5 WHERE ns = $1 AND agent_id = $2",
            &[
                (&ns, Type::TEXT),
                (&doc.agent_id, Type::TEXT),
                (&doc.cwd, Type::TEXT),
                (&doc.updated_at, Type::FLOAT8),
                (&doc.json.as_str(), Type::TEXT),
            ],
        )
        .await?;
    if n == 0 {
        return Err(StoreError::NotFound(format!("agent {} not found", doc.agent_id)).into());
    }
    Ok(Some(doc.json.as_str().to_string()))
}

/// Deletes the matching agents and everything that belongs to them. Idempotent.
pub async fn delete(db: &Db<'_>, ns: &str, filter: &AgentFilter) -> Result<StoreOutput, Fail> {
    let mut c = Conditions::new(ns);
    c.in_list("agent_id", filter.agent_ids.as_deref());
    if let Some(cwd) = &filter.cwd {
        c.eq("cwd", cwd);
    }
    let rows = db
        .query(
            &format!("SELECT agent_id FROM agents WHERE {} FOR UPDATE", c.sql()),
            &c.params(),
        )
        .await?;
    let ids: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    if ids.is_empty() {
        return Ok(None);
    }
    cascade::delete_agents(db, ns, &ids).await?;
    Ok(None)
}

/// `updatedAt` desc, `agentId` desc; the cursor holds the last item's pair.
pub async fn list(
    db: &Db<'_>,
    ns: &str,
    filter: &AgentFilter,
    page: &Page<AgentCursor>,
) -> Result<StoreOutput, Fail> {
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
    let out = ORDER
        .page(db, c, after, page.limit, |updated_at, agent_id| {
            AgentCursor {
                updated_at,
                agent_id,
            }
            .encode()
        })
        .await?;
    Ok(Some(out))
}
