//! SQL-level tests of the SQLite store, on a temp-dir database.

use super::*;

fn store() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&SqliteOptions::new(dir.path().join("t.db"))).unwrap();
    (dir, store)
}

async fn call(
    store: &SqliteStore,
    sub: &str,
    method: &str,
    input: &str,
) -> Result<StoreOutput, StoreError> {
    let call = StoreCall::parse(sub, method, input)?;
    store.call(&Namespace::default(), call).await
}

#[tokio::test]
async fn appends_number_events_per_run_from_one() {
    let (_dir, s) = store();
    for run in ["r1", "r2", "r1"] {
        call(
            &s,
            "runEvents",
            "append",
            &format!(r#"{{"runId":"{run}","eventType":"e"}}"#),
        )
        .await
        .unwrap();
    }
    let out = call(&s, "runEvents", "list", r#"{"runId":"r1"}"#)
        .await
        .unwrap()
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let seqs: Vec<_> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["offset"].clone())
        .collect();
    assert_eq!(seqs, ["1", "2"]);
    assert!(v.get("nextOffset").is_none());
}

#[tokio::test]
async fn a_failed_job_does_not_undo_its_batch_neighbours() {
    let (_dir, s) = store();
    let doc = r#"{"agent":{"agentId":"a","cwd":"/w","updatedAt":1}}"#;
    let (a, b, c) = tokio::join!(
        call(&s, "agents", "create", doc),
        call(&s, "agents", "create", doc),
        call(
            &s,
            "runEvents",
            "append",
            r#"{"runId":"r","eventType":"e"}"#
        ),
    );
    assert!(a.is_ok() != b.is_ok(), "exactly one create wins");
    assert!(c.is_ok());
    assert!(call(&s, "agents", "get", r#"{"agentId":"a"}"#)
        .await
        .unwrap()
        .is_some());
}

#[tokio::test]
async fn write_with_runs_on_the_writer_and_read_with_sees_it() {
    let (_dir, s) = store();
    s.write_with(|c| {
        c.execute(
            "INSERT INTO memory_notes (ns, agent_id, key, value, updated_at) VALUES ('default','a','k','v',1)",
            [],
        )?;
        Ok(())
    })
    .await
    .unwrap();
    let n: i64 = s
        .read_with(|c| Ok(c.query_row("SELECT count(*) FROM memory_notes", [], |r| r.get(0))?))
        .await
        .unwrap();
    assert_eq!(n, 1);
}

#[tokio::test]
async fn a_full_database_answers_full_and_keeps_earlier_data() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = SqliteOptions::new(dir.path().join("full.db"));
    // The schema itself takes most of these pages (each table and index one or two).
    opts.max_page_count = Some(48);
    let s = SqliteStore::open(&opts).unwrap();
    call(
        &s,
        "runEvents",
        "append",
        r#"{"runId":"r","eventType":"e","payload":1}"#,
    )
    .await
    .unwrap();
    let big = "x".repeat(64 * 1024);
    let err = loop {
        let r = call(
            &s,
            "runEvents",
            "append",
            &format!(r#"{{"runId":"r","eventType":"e","payload":"{big}"}}"#),
        )
        .await;
        if let Err(e) = r {
            break e;
        }
    };
    assert!(matches!(err, StoreError::Full(_)), "{err:?}");
    let out = call(&s, "runEvents", "list", r#"{"runId":"r","limit":1}"#)
        .await
        .unwrap()
        .unwrap();
    assert!(out.contains(r#""payload":1"#));
}
