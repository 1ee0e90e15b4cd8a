//! SQL of the `runs` substore on PostgreSQL.

use tokio_postgres::types::Type;

use super::cascade;
use super::db::{Conditions, Db};
use super::error::Fail;
use super::keyset::Keyset;
use crate::store::{Page, RunCursor, RunDoc, RunFilter, StoreError, StoreOutput};

/// The run must match both ids.
pub async fn get(db: &Db<'_>, ns: &str, agent_id: &str, run_id: &str) -> Result<StoreOutput, Fail> {
    let row = db
        .query_opt(
            "SELECT doc FROM runs WHERE ns = $1 AND agent_id = $2 AND run_id = $3",
            &[
                (&ns, Type::TEXT),
                (&agent_id, Type::TEXT),
                (&run_id, Type::TEXT),
            ],
        )
        .await?;
    Ok(row.map(|r| r.get(0)))
}

pub async fn create(db: &Db<'_>, ns: &str, doc: &RunDoc) -> Result<StoreOutput, Fail> {
    let n = db
        .execute(
            "INSERT INTO runs (ns, agent_id, run_id, turn_number, doc) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (ns, agent_id, run_id) DO NOTHING",
            &[
                (&ns, Type::TEXT),
                (&doc.agent_id, Type::TEXT),
                (&doc.run_id, Type::TEXT),
                (&doc.turn_number, Type::FLOAT8),
                (&doc.json.as_str(), Type::TEXT),
            ],
        )
        .await?;
    if n == 0 {
        return Err(StoreError::AlreadyExists(format!(
            "run {} already exists for agent {}",
            doc.run_id, doc.agent_id
        ))
        .into());
    }
    Ok(Some(doc.json.as_str().to_string()))
}

pub async fn update(db: &Db<'_>, ns: &str, doc: &RunDoc) -> Result<StoreOutput, Fail> {
    let n = db
        .execute(
            "UPDATE runs SET turn_number = $4, doc = $5 WHERE ns = $1 AND agent_id = $2 AND run_id = $3",
            &[
                (&ns, Type::TEXT),
                (&doc.agent_id, Type::TEXT),
                (&doc.run_id, Type::TEXT),
                (&doc.turn_number, Type::FLOAT8),
                (&doc.json.as_str(), Type::TEXT),
            ],
        )
        .await?;
    if n == 0 {
        return Err(StoreError::NotFound(format!(
            "run {} not found for agent {}",
            doc.run_id, doc.agent_id
        ))
        .into());
    }
    Ok(Some(doc.json.as_str().to_string()))
}

/// Deletes the matching runs and their events. Idempotent.
pub async fn delete(db: &Db<'_>, ns: &str, filter: &RunFilter) -> Result<StoreOutput, Fail> {
    cascade::delete_runs_where(db, &conditions(ns, filter)).await?;
    Ok(None)
}

/// `turnNumber` asc, `runId` asc; the cursor holds the last item's pair.
pub async fn list(
    db: &Db<'_>,
    ns: &str,
    filter: &RunFilter,
    page: &Page<RunCursor>,
) -> Result<StoreOutput, Fail> {
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
    let out = ORDER
        .page(
            db,
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
        )
        .await?;
    Ok(Some(out))
}

fn conditions(ns: &str, filter: &RunFilter) -> Conditions {
    let mut c = Conditions::new(ns);
    c.in_list("agent_id", filter.agent_ids.as_deref());
    c.in_list("run_id", filter.run_ids.as_deref());
    c
}
