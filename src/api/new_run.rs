//! The document of a run the bridge just started (`POST .../messages`), found through the
//! store's notices instead of polling: the bridge creates the run (`runs.create`) before it
//! appends any of its events (callback contract §3.2-3.3), and its `Send` stream names the
//! run only once it is running, so the document is usually there at the first read; when
//! it is not, the run's first append is the wake-up to read it again.

use std::time::Duration;

use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use super::problem::Problem;
use super::reader::Reader;
use crate::store::{Store, StoreNotice};

/// How long the run may take to appear after the bridge named it (as long as the polling
/// it replaces waited: 50 × 20 ms).
const WAIT: Duration = Duration::from_secs(1);

/// Run `run_id`'s document, read again at each append of that run (or notice that notices
/// were missed), for up to [`WAIT`]; an `internal` problem if it never appears.
pub async fn new_run_doc(
    store: &dyn Store,
    reader: &Reader<'_>,
    run_id: &str,
) -> Result<Value, Problem> {
    within(store, reader, run_id, WAIT).await
}

async fn within(
    store: &dyn Store,
    reader: &Reader<'_>,
    run_id: &str,
    wait: Duration,
) -> Result<Value, Problem> {
    // Subscribed before the first read: an append between that read and the wait is heard.
    let mut notices = store.subscribe();
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        if let Some(doc) = reader.run(run_id).await? {
            return Ok(doc);
        }
        let heard = tokio::time::timeout_at(deadline, async {
            loop {
                match notices.recv().await {
                    Ok(StoreNotice::Appended(n) | StoreNotice::Remote(n))
                        if n.run_id == run_id && n.ns == *reader.ns =>
                    {
                        return true
                    }
                    Ok(StoreNotice::Resync) | Err(RecvError::Lagged(_)) => return true,
                    Ok(_) => {}
                    Err(RecvError::Closed) => return false,
                }
            }
        })
        .await;
        if heard != Ok(true) {
            // Out of time (or the store is closing): one last read, whatever was announced.
            return reader.run(run_id).await?.ok_or_else(|| {
                Problem::internal(format!(
                    "the bridge started run {run_id} but it is not in the store"
                ))
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::store::sqlite::{SqliteOptions, SqliteStore};
    use crate::store::{Namespace, RunRecords, StoreCall};

    fn store() -> (tempfile::TempDir, Arc<SqliteStore>) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&SqliteOptions::new(dir.path().join("t.db"))).unwrap();
        (dir, Arc::new(store))
    }

    async fn call(store: &SqliteStore, sub: &str, method: &str, input: Value) {
        let call = StoreCall::parse(sub, method, &input.to_string()).unwrap();
        store.call(&Namespace::default(), call).await.unwrap();
    }

    /// The run API's reads of `s`, in namespace `ns`.
    fn reader_of<'a>(s: &'a SqliteStore, ns: &'a Namespace) -> Reader<'a> {
        Reader {
            store: s,
            records: s as &dyn RunRecords,
            ns,
        }
    }

    fn run(run_id: &str) -> Value {
        json!({"run": {"runId": run_id, "requestId": null, "agentId": "a1", "turnNumber": 1,
            "status": "queued", "model": {"id": "m"}, "result": null, "error": null,
            "usageRef": null, "usage": null, "createdAt": 1, "updatedAt": 1, "startedAt": null,
            "endedAt": null, "startCheckpointRef": null, "latestCheckpointRef": null}})
    }

    /// Created and appended to while the reader waits (after another run's append, which
    /// is no reason to stop waiting): found at that append. Its deadline is an hour away, so
    /// only the notice can end the wait within the test's 20 s guard.
    #[tokio::test]
    async fn a_run_created_while_waiting_is_found() {
        let (_dir, s) = store();
        let ns = Namespace::default();
        let reader = reader_of(&s, &ns);
        let bridge = s.clone();
        let writer = async move {
            call(
                &bridge,
                "runEvents",
                "append",
                json!({"runId": "r0", "eventType": "e"}),
            )
            .await;
            call(&bridge, "runs", "create", run("r1")).await;
            call(
                &bridge,
                "runEvents",
                "append",
                json!({"runId": "r1", "eventType": "e"}),
            )
            .await;
        };
        let hour = Duration::from_secs(3600);
        let waited = async { tokio::join!(within(s.as_ref(), &reader, "r1", hour), writer).0 };
        let doc = tokio::time::timeout(Duration::from_secs(20), waited)
            .await
            .expect("the append of r1 did not end the wait");
        assert_eq!(doc.unwrap()["runId"], "r1");
    }

    #[tokio::test]
    async fn a_run_that_never_appears_is_a_problem_naming_it_and_one_never_appended_is_found() {
        let (_dir, s) = store();
        let ns = Namespace::default();
        let reader = reader_of(&s, &ns);
        call(
            &s,
            "runEvents",
            "append",
            json!({"runId": "r0", "eventType": "e"}),
        )
        .await;
        let err = new_run_doc(s.as_ref(), &reader, "r9").await.unwrap_err();
        assert!(err.detail.contains("run r9"), "{}", err.detail);
        // Created but never appended to: found by the last read at the deadline.
        let bridge = s.clone();
        let late = async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            call(&bridge, "runs", "create", run("r2")).await;
        };
        let (doc, ()) = tokio::join!(new_run_doc(s.as_ref(), &reader, "r2"), late);
        assert_eq!(doc.unwrap()["runId"], "r2");
    }
}
