//! Deletes that reach across substores, kept in one place so every path removes the same
//! rows: an agent takes its runs, their events, its checkpoints, its memory notes, its
//! tool call records, its approvals, its fork record (`session_forks`) and its AG-UI thread
//! aliases (`ag_ui_threads`) with it; a run
//! takes its events. The run API's notes beside a run's events (`event_meta`,
//! `run_expiry`, the run's input in `run_inputs`) and, on PostgreSQL, the run's seq counter go with the events
//! ([`Dialect::event_tables`](super::Dialect::event_tables)):
//! a run whose events were all deleted numbers from 1 again.

use super::{Conditions, Exec, Value};
use crate::store::StoreOutput;

/// The tables that hold rows of an agent (keyed by `(ns, agent_id, …)`), the agents last.
const AGENT_TABLES: [&str; 8] = [
    "runs",
    "checkpoints",
    "memory_notes",
    "tool_calls",
    "approvals",
    "session_forks",
    "ag_ui_threads",
    "agents",
];

pub async fn delete_agents<X: Exec>(x: &X, ns: &str, ids: &[String]) -> Result<(), X::Error> {
    let d = X::DIALECT;
    let (p_ns, in_agents) = (d.param(1), d.in_list("agent_id", 2));
    let params = [Value::Text(ns), Value::TextList(ids)];
    for table in d.event_tables() {
        let sql = format!(
            "DELETE FROM {table} WHERE ns = {p_ns} AND run_id IN \
             (SELECT run_id FROM runs WHERE ns = {p_ns} AND {in_agents})"
        );
        x.execute(&sql, &params).await?;
    }
    for table in AGENT_TABLES {
        let sql = format!("DELETE FROM {table} WHERE ns = {p_ns} AND {in_agents}");
        x.execute(&sql, &params).await?;
    }
    Ok(())
}

/// Deletes the runs matching `c` (conditions on the `runs` table) and their events.
pub async fn delete_runs_where<X: Exec>(x: &X, c: &Conditions<'_>) -> Result<(), X::Error> {
    let p_ns = X::DIALECT.param(1);
    for table in X::DIALECT.event_tables() {
        let sql = format!(
            "DELETE FROM {table} WHERE ns = {p_ns} AND run_id IN (SELECT run_id FROM runs WHERE {})",
            c.sql()
        );
        x.execute(&sql, c.params()).await?;
    }
    x.execute(&format!("DELETE FROM runs WHERE {}", c.sql()), c.params())
        .await?;
    Ok(())
}

/// `runEvents.delete`: the events of `run_ids`, or of every run (contract §2.6
/// recommendation). Idempotent.
pub async fn delete_events<X: Exec>(
    x: &X,
    ns: &str,
    run_ids: Option<&[String]>,
) -> Result<StoreOutput, X::Error> {
    let mut c = Conditions::new(X::DIALECT, ns);
    c.in_list("run_id", run_ids);
    for table in X::DIALECT.event_tables() {
        x.execute(
            &format!("DELETE FROM {table} WHERE {}", c.sql()),
            c.params(),
        )
        .await?;
    }
    Ok(None)
}
