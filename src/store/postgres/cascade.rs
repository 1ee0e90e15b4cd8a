//! Deletes that reach across substores, as on SQLite: an agent takes its runs, their
//! events, its checkpoints, its memory notes, its tool call records and approvals with it; a run takes
//! its events. Events go with their run's seq counter, so a run whose events were all
//! deleted numbers from 1 again (SQLite's max(seq) + 1), and with the run API's notes
//! beside them (`event_meta`, `run_expiry`).
//!
//! The counter goes first: deleting its row waits for any append of that run still in
//! flight (it holds the row), and the event delete that follows, a new statement with a
//! new snapshot, then also removes that append's event. The other way round, an event
//! committed between the two statements would outlive its counter.

use tokio_postgres::types::Type;

use super::db::{Conditions, Db};
use super::error::Fail;

/// The tables keyed by `(ns, run_id)` that go with a run's events.
/// The counter first (see above).
pub const EVENT_TABLES: [&str; 4] = ["run_seqs", "run_events", "event_meta", "run_expiry"];

pub async fn delete_agents(db: &Db<'_>, ns: &str, ids: &[String]) -> Result<(), Fail> {
    let params = [(&ns as _, Type::TEXT), (&ids as _, Type::TEXT_ARRAY)];
    const RUNS: &str = "run_id IN (SELECT run_id FROM runs WHERE ns = $1 AND agent_id = ANY($2))";
    for table in EVENT_TABLES {
        db.execute(
            &format!("DELETE FROM {table} WHERE ns = $1 AND {RUNS}"),
            &params,
        )
        .await?;
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
        db.execute(
            &format!("DELETE FROM {table} WHERE ns = $1 AND agent_id = ANY($2)"),
            &params,
        )
        .await?;
    }
    Ok(())
}

/// Deletes the runs matching `c` (conditions on the `runs` table) and their events.
pub async fn delete_runs_where(db: &Db<'_>, c: &Conditions) -> Result<(), Fail> {
    let params = c.params();
    for table in EVENT_TABLES {
        db.execute(
            &format!(
                "DELETE FROM {table} WHERE ns = $1 AND run_id IN (SELECT run_id FROM runs WHERE {})",
                c.sql()
            ),
            &params,
        )
        .await?;
    }
    db.execute(&format!("DELETE FROM runs WHERE {}", c.sql()), &params)
        .await?;
    Ok(())
}

/// `runEvents.delete`: the events (and counters) of `run_ids`, or of every run.
pub async fn delete_events(db: &Db<'_>, ns: &str, run_ids: Option<&[String]>) -> Result<(), Fail> {
    let mut c = Conditions::new(ns);
    c.in_list("run_id", run_ids);
    let params = c.params();
    for table in EVENT_TABLES {
        db.execute(&format!("DELETE FROM {table} WHERE {}", c.sql()), &params)
            .await?;
    }
    Ok(())
}
