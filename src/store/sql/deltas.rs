//! A message snapshot's delta (`event_meta`): how many live token fragments a follower was
//! relayed before the snapshot, recorded once for the run so that every reader and every
//! replay tells the same `delta`, whichever daemon first framed it.
//!
//! Read first, on a read connection outside a transaction ([`delta_seen`]): most snapshots
//! of a followed run have nothing to record (no tokens were relayed for them), so their frame
//! costs one statement; only a first sighting with a delta goes to the writer ([`delta_of`]).

use super::{sql, Exec, Value};

/// The delta of event `seq` when no write is needed: the recorded one, or 0 when none is
/// recorded and `new` is none; `None` when `new` must be recorded ([`delta_of`]).
pub async fn delta_seen<X: Exec>(
    x: &X,
    ns: &str,
    run_id: &str,
    seq: i64,
    new: Option<u32>,
) -> Result<Option<u32>, X::Error> {
    let seen = read_delta(x, ns, run_id, seq).await?;
    Ok(seen.or(new.is_none().then_some(0)))
}

/// The delta recorded for event `seq` of a run, if any.
async fn read_delta<X: Exec>(
    x: &X,
    ns: &str,
    run_id: &str,
    seq: i64,
) -> Result<Option<u32>, X::Error> {
    let sql = sql!("SELECT delta FROM event_meta WHERE ns = ?1 AND run_id = ?2 AND seq = ?3");
    let params = [Value::Text(ns), Value::Text(run_id), Value::Int(seq)];
    let delta = x.first(sql.get(X::DIALECT), &params, |r| r.int(0)).await?;
    Ok(delta.map(|d| u32::try_from(d).unwrap_or(0)))
}

/// The delta of event `seq`: the recorded one, else `new` recorded (0 when there is none to
/// record), in the caller's transaction.
pub async fn delta_of<X: Exec>(
    x: &X,
    ns: &str,
    run_id: &str,
    seq: i64,
    new: Option<u32>,
) -> Result<u32, X::Error> {
    if let Some(delta) = read_delta(x, ns, run_id, seq).await? {
        return Ok(delta);
    }
    match new {
        Some(new) => record_delta(x, ns, run_id, seq, new).await,
        None => Ok(0),
    }
}

/// Records `new` as the delta of event `seq` unless one is recorded (the first value
/// recorded wins, whichever daemon records it); the recorded one.
async fn record_delta<X: Exec>(
    x: &X,
    ns: &str,
    run_id: &str,
    seq: i64,
    new: u32,
) -> Result<u32, X::Error> {
    let sql = sql!(
        "INSERT INTO event_meta (ns, run_id, seq, delta) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT DO NOTHING"
    );
    let params = [
        Value::Text(ns),
        Value::Text(run_id),
        Value::Int(seq),
        Value::Int(i64::from(new)),
    ];
    x.execute(sql.get(X::DIALECT), &params).await?;
    Ok(read_delta(x, ns, run_id, seq).await?.unwrap_or(new))
}
