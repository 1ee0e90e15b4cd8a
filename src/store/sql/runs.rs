//! SQL of the `runs` substore.

use super::{cascade, sql, Conditions, Exec, Keyset, Value};
use crate::store::{Page, RunCursor, RunDoc, RunFilter, StoreError, StoreOutput};

/// The run must match both ids.
pub async fn get<X: Exec>(
    x: &X,
    ns: &str,
    agent_id: &str,
    run_id: &str,
) -> Result<StoreOutput, X::Error> {
    let sql = sql!("SELECT doc FROM runs WHERE ns = ?1 AND agent_id = ?2 AND run_id = ?3");
    x.first(
        sql.get(X::DIALECT),
        &[Value::Text(ns), Value::Text(agent_id), Value::Text(run_id)],
        |r| Ok(r.text(0)?.to_string()),
    )
    .await
}

pub async fn create<X: Exec>(x: &X, ns: &str, doc: &RunDoc) -> Result<StoreOutput, X::Error> {
    let sql = sql!(
        "INSERT INTO runs (ns, agent_id, run_id, turn_number, doc) VALUES (?1, ?2, ?3, ?4, ?5)",
        pg: " ON CONFLICT (ns, agent_id, run_id) DO NOTHING"
    );
    if !x.insert_new(sql.get(X::DIALECT), &params(ns, doc)).await? {
        return Err(StoreError::AlreadyExists(format!(
            "run {} already exists for agent {}",
            doc.run_id, doc.agent_id
        ))
        .into());
    }
    Ok(Some(doc.json.as_str().to_string()))
}

/// The document of run `run_id` of agent `agent_id`, read in a write's transaction with its
/// row locked (PostgreSQL `FOR UPDATE`; SQLite writes one at a time anyway): two writers
/// ending the run at once see each other, so only the first is its end.
pub async fn get_locked<X: Exec>(
    x: &X,
    ns: &str,
    agent_id: &str,
    run_id: &str,
) -> Result<Option<String>, X::Error> {
    let select = sql!("SELECT doc FROM runs WHERE ns = ?1 AND agent_id = ?2 AND run_id = ?3");
    let sql = format!("{}{}", select.get(X::DIALECT), X::DIALECT.for_update());
    x.first(
        &sql,
        &[Value::Text(ns), Value::Text(agent_id), Value::Text(run_id)],
        |r| Ok(r.text(0)?.to_string()),
    )
    .await
}

pub async fn update<X: Exec>(x: &X, ns: &str, doc: &RunDoc) -> Result<StoreOutput, X::Error> {
    let sql = sql!(
        "UPDATE runs SET turn_number = ?4, doc = ?5 WHERE ns = ?1 AND agent_id = ?2 AND run_id = ?3"
    );
    if x.execute(sql.get(X::DIALECT), &params(ns, doc)).await? == 0 {
        return Err(StoreError::NotFound(format!(
            "run {} not found for agent {}",
            doc.run_id, doc.agent_id
        ))
        .into());
    }
    Ok(Some(doc.json.as_str().to_string()))
}

fn params<'a>(ns: &'a str, doc: &'a RunDoc) -> [Value<'a>; 5] {
    [
        Value::Text(ns),
        Value::Text(&doc.agent_id),
        Value::Text(&doc.run_id),
        Value::Float(doc.turn_number),
        Value::Text(doc.json.as_str()),
    ]
}

/// Deletes the matching runs and their events (JSONL-store semantics). Idempotent.
pub async fn delete<X: Exec>(x: &X, ns: &str, filter: &RunFilter) -> Result<StoreOutput, X::Error> {
    cascade::delete_runs_where(x, &conditions::<X>(ns, filter)).await?;
    Ok(None)
}

/// The document of the agent's latest run: the last of `runs.list`'s order (`turnNumber`,
/// then `runId`), read backwards on the `runs_by_agent_turn` index, one row, however many
/// runs the agent has.
pub async fn latest_of_agent<X: Exec>(
    x: &X,
    ns: &str,
    agent_id: &str,
) -> Result<Option<String>, X::Error> {
    let sql = sql!(
        "SELECT doc FROM runs WHERE ns = ?1 AND agent_id = ?2 \
         ORDER BY turn_number DESC, run_id DESC LIMIT 1"
    );
    x.first(
        sql.get(X::DIALECT),
        &[Value::Text(ns), Value::Text(agent_id)],
        |r| Ok(r.text(0)?.to_string()),
    )
    .await
}

/// `turnNumber` asc, `runId` asc; the cursor holds the last item's pair.
pub async fn list<X: Exec>(
    x: &X,
    ns: &str,
    filter: &RunFilter,
    page: &Page<RunCursor>,
) -> Result<StoreOutput, X::Error> {
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
            x,
            conditions::<X>(ns, filter),
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

fn conditions<'a, X: Exec>(ns: &'a str, filter: &'a RunFilter) -> Conditions<'a> {
    let mut c = Conditions::new(X::DIALECT, ns);
    c.in_list("agent_id", filter.agent_ids.as_deref());
    c.in_list("run_id", filter.run_ids.as_deref());
    c
}
