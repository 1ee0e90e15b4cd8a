//! Retention, written once for both backends: which runs have ended long enough ago, removing
//! their events in bounded batches (remembering in `run_expiry` how far each run went), what
//! a prune would remove (`prune --dry-run`), and the start-up sweep of the tool calls a
//! stopped daemon left running or awaiting a decision.

use super::{sql, Dialect, Exec, Value};
use crate::store::event_doc::now_ms;
use crate::store::records::{PrunePreview, PruneReport};

/// The statuses after which a run changes no more (retention removes only their events).
pub const TERMINAL: &str = "('finished','error','cancelled','expired')";

/// SQL: run `r` is terminal and ended (or, without `endedAt`, was last updated) before
/// parameter `n`, a number of milliseconds (`float8` on PostgreSQL).
pub fn ended_before(d: Dialect, n: usize) -> String {
    format!(
        "{} IN {TERMINAL} AND coalesce({}, {}) < {}",
        d.doc_text("r.doc", "status"),
        d.doc_number("r.doc", "endedAt"),
        d.doc_number("r.doc", "updatedAt"),
        d.typed(n, "float8"),
    )
}

/// Removes the events of up to `batch` terminal runs (of every namespace) that ended before
/// `ended_before_ms`, remembering in `run_expiry` how far each run's events went. On
/// PostgreSQL the runs taken are locked and those another daemon's prune holds are skipped
/// (`SKIP LOCKED`: daemons pruning at once take different runs), and each run's seq counter
/// goes with its events. The caller's transaction makes the batch one commit.
pub async fn prune_runs<X: Exec>(
    x: &X,
    ended_before_ms: i64,
    batch: usize,
) -> Result<PruneReport, X::Error> {
    let d = X::DIALECT;
    let (lock, greatest, also): (&str, &str, &[&str]) = match d {
        Dialect::Sqlite => ("", "max", &["event_meta"]),
        Dialect::Postgres => (
            " FOR UPDATE OF r SKIP LOCKED",
            "greatest",
            &["event_meta", "run_seqs"],
        ),
    };
    let sql = format!(
        "SELECT r.ns, r.run_id, \
           (SELECT max(seq) FROM run_events e WHERE e.ns = r.ns AND e.run_id = r.run_id) \
         FROM runs r WHERE {} \
           AND EXISTS (SELECT 1 FROM run_events e WHERE e.ns = r.ns AND e.run_id = r.run_id) \
         LIMIT {}{lock}",
        ended_before(d, 1),
        d.param(2)
    );
    let params = [
        Value::Float(ended_before_ms as f64),
        Value::Int(i64::try_from(batch).unwrap_or(i64::MAX)),
    ];
    let runs = x
        .all(&sql, &params, |r| {
            Ok((
                r.text(0)?.to_string(),
                r.text(1)?.to_string(),
                r.opt_int(2)?,
            ))
        })
        .await?;
    let mut report = PruneReport::default();
    let now = now_ms();
    for (ns, run_id, last) in &runs {
        let Some(last) = *last else { continue };
        let key = [Value::Text(ns), Value::Text(run_id)];
        let events = sql!("DELETE FROM run_events WHERE ns = ?1 AND run_id = ?2");
        report.events += x.execute(events.get(d), &key).await?;
        for table in also {
            let sql = format!(
                "DELETE FROM {table} WHERE ns = {} AND run_id = {}",
                d.param(1),
                d.param(2)
            );
            x.execute(&sql, &key).await?;
        }
        let sql = format!(
            "INSERT INTO run_expiry (ns, run_id, expired_through, pruned_at) \
             VALUES ({}, {}, {}, {}) ON CONFLICT (ns, run_id) DO UPDATE SET \
             expired_through = {greatest}(run_expiry.expired_through, excluded.expired_through), \
             pruned_at = excluded.pruned_at",
            d.param(1),
            d.param(2),
            d.param(3),
            d.param(4)
        );
        let params = [
            Value::Text(ns),
            Value::Text(run_id),
            Value::Int(last),
            Value::Int(now),
        ];
        x.execute(&sql, &params).await?;
        report.runs += 1;
    }
    Ok(report)
}

/// At start: calls left `running` are interrupted (cut off), calls left awaiting approval
/// cancelled (they never ran); `only` narrows both to the calls of daemons that are gone
/// (`AND …`, PostgreSQL's, where other daemons' calls still run). The interrupted ones.
pub async fn interrupt_tool_calls<X: Exec>(x: &X, only: &str) -> Result<u64, X::Error> {
    let now = [Value::Int(now_ms())];
    let p = X::DIALECT.param(1);
    let sql = format!(
        "UPDATE tool_calls SET outcome = 'interrupted', cut_off = true, \
         ended_at = coalesce(ended_at, {p}) WHERE outcome = 'running'{only}"
    );
    let interrupted = x.execute(&sql, &now).await?;
    let sql = format!(
        "UPDATE tool_calls SET outcome = 'cancelled', cut_off = false, \
         ended_at = coalesce(ended_at, {p}) WHERE outcome = 'awaiting'{only}"
    );
    x.execute(&sql, &now).await?;
    Ok(interrupted)
}

/// What pruning the runs that ended before `ended_before_ms` would remove.
pub async fn prune_preview<X: Exec>(x: &X, ended_before_ms: i64) -> Result<PrunePreview, X::Error> {
    let d = X::DIALECT;
    let sql = format!(
        "SELECT count(*), {}, {} FROM ( \
           SELECT count(*) AS n, {} AS b FROM runs r \
           JOIN run_events e ON e.ns = r.ns AND e.run_id = r.run_id \
           WHERE {} GROUP BY r.ns, r.run_id) AS t",
        d.sum_int("n"),
        d.sum_int("b"),
        d.sum_int(&d.byte_length("e.payload")),
        ended_before(d, 1),
    );
    let preview = x
        .first(&sql, &[Value::Float(ended_before_ms as f64)], |r| {
            let n = |i| Ok::<_, crate::store::StoreError>(r.int(i)?.max(0) as u64);
            Ok(PrunePreview {
                runs: n(0)?,
                events: n(1)?,
                bytes: n(2)?,
            })
        })
        .await?;
    Ok(preview.unwrap_or_default())
}
