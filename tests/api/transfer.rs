//! `callbackd export` / `import`: a round trip keeps every record, and bad directories are
//! refused whole, naming the file and line.

use std::path::Path;
use std::process::Command;

use callbackd::store::sqlite::SqliteOptions;
use callbackd::transfer::{jsonl_export, jsonl_import};
use callbackd::Namespace;
use serde_json::{json, Value};

use crate::helpers::{agent, run, TestApp};

const BIN: &str = env!("CARGO_BIN_EXE_callbackd");

fn callbackd(args: &[&str]) -> (bool, String) {
    let out = Command::new(BIN)
        .args(args)
        .env_remove("CALLBACKD_CONFIG")
        .output()
        .expect("run callbackd");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn import(db: &Path, dir: &Path, replace: bool) -> Result<String, String> {
    jsonl_import::import(&SqliteOptions::new(db), &Namespace::default(), dir, replace)
        .map(|c| c.to_string())
        .map_err(|e| format!("{e:#}"))
}

fn count(db: &Path, table: &str) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

/// A small valid JSONL store: one agent, one run, `n` events, one blob.
fn write_store(dir: &Path, n: u64) {
    std::fs::create_dir_all(dir).unwrap();
    let a = agent("a1", "/ws", 1_780_000_000_000);
    let r = run("a1", "r1", 1);
    std::fs::write(dir.join("agents.ndjson"), format!("{a}\n")).unwrap();
    std::fs::write(dir.join("runs.ndjson"), format!("{r}\n")).unwrap();
    let events: String = (1..=n)
        .map(|seq| {
            format!(
                "{}\n",
                json!({"runId": "r1", "seq": seq, "offset": seq.to_string(), "eventType": "run_stream_event",
                       "payload": {"i": seq}, "payloadRef": null, "idempotencyKey": null,
                       "createdAt": "2026-05-28T20:26:40.123Z"})
            )
        })
        .collect();
    std::fs::write(dir.join("run_events.ndjson"), events).unwrap();
    std::fs::write(
        dir.join("checkpoints.ndjson"),
        format!(
            "{}\n",
            json!({"agentId": "a1", "blobId": "b1", "dataBase64": "AAECAw=="})
        ),
    )
    .unwrap();
}

#[tokio::test]
async fn export_then_import_keeps_every_record() {
    let app = TestApp::spawn_sqlite().await;
    // A pretty-printed document is stored verbatim; the export puts it on one line.
    let pretty = "{\n  \"agentId\": \"a1\",\n  \"cwd\": \"/ws\",\n  \"status\": \"idle\",\n  \"createdAt\": 1,\n  \"updatedAt\": 2.50,\n  \"name\": \"a b\\n c\"\n}";
    let body = format!(r#"{{"substore":"agents","method":"create","input":{{"agent":{pretty}}}}}"#);
    assert_eq!(
        app.store_raw(body, crate::helpers::Framing::Chunked)
            .await
            .status,
        200
    );
    app.store_ok("runs", "create", json!({"run": run("a1", "r1", 1)}))
        .await;
    for i in 0..3 {
        app.store_ok(
            "runEvents",
            "append",
            json!({"runId": "r1", "eventType": "t", "payload": {"i": i, "s": "ü \"q\""},
                   "idempotencyKey": format!("k{i}")}),
        )
        .await;
    }
    app.store_ok(
        "runEvents",
        "append",
        json!({"runId": "r1", "eventType": "bare"}),
    )
    .await;
    app.store_ok(
        "checkpoints",
        "create",
        json!({"agentId": "a1", "blobId": "b1", "data": "AAECAwQF"}),
    )
    .await;

    let dir = app.dir.path().join("out");
    let counts = jsonl_export::export(&app.db, &Namespace::default(), &dir).unwrap();
    assert_eq!(
        counts.to_string(),
        "1 agents, 1 runs, 4 run events, 1 checkpoint blobs"
    );
    let agents = std::fs::read_to_string(dir.join("agents.ndjson")).unwrap();
    assert_eq!(
        agents,
        "{\"agentId\":\"a1\",\"cwd\":\"/ws\",\"status\":\"idle\",\"createdAt\":1,\"updatedAt\":2.50,\"name\":\"a b\\n c\"}\n"
    );
    let events: Vec<Value> = std::fs::read_to_string(dir.join("run_events.ndjson"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 4);
    assert_eq!(events[3]["payload"], Value::Null);
    assert_eq!(events[1]["idempotencyKey"], "k1");
    assert_eq!(events[0]["offset"], "1");
    assert!(events[0]["createdAt"].as_str().unwrap().ends_with('Z'));

    // Into a fresh database, and the store answers as before.
    let db2 = app.dir.path().join("second.db");
    assert_eq!(import(&db2, &dir, false).unwrap(), counts.to_string());
    let original = rusqlite::Connection::open(&app.db).unwrap();
    let copy = rusqlite::Connection::open(&db2).unwrap();
    for sql in [
        "SELECT agent_id || cwd || updated_at FROM agents",
        "SELECT group_concat(run_id || seq || event_type || payload || ifnull(idempotency_key, '-') || created_at, '|') FROM (SELECT * FROM run_events ORDER BY seq)",
        "SELECT hex(data) || crc32 FROM checkpoints",
        "SELECT doc FROM runs",
    ] {
        let a: String = original.query_row(sql, [], |r| r.get(0)).unwrap();
        let b: String = copy.query_row(sql, [], |r| r.get(0)).unwrap();
        assert_eq!(a, b, "{sql}");
    }
    let doc: String = copy
        .query_row("SELECT doc FROM agents", [], |r| r.get(0))
        .unwrap();
    assert_eq!(doc, agents.trim_end());

    // Export refuses a directory that is not empty, and leaves it alone.
    let err = jsonl_export::export(&app.db, &Namespace::default(), &dir).unwrap_err();
    assert!(err.to_string().contains("is not empty"), "{err}");
    let (ok, stderr) = callbackd(&[
        "export",
        "--db",
        app.db.to_str().unwrap(),
        dir.to_str().unwrap(),
    ]);
    assert!(!ok && stderr.contains("is not empty"), "{stderr}");
}

#[tokio::test]
async fn export_refuses_a_record_the_bridge_would_reject_and_leaves_nothing() {
    let app = TestApp::spawn_sqlite().await;
    // A document callbackd accepts but the bridge's JSONL store would call corrupt.
    app.store_ok(
        "agents",
        "create",
        json!({"agent": {"agentId": "odd", "cwd": "/w", "status": "sleeping", "createdAt": 1, "updatedAt": 1}}),
    )
    .await;
    let dir = app.dir.path().join("out");
    let err = jsonl_export::export(&app.db, &Namespace::default(), &dir).unwrap_err();
    assert!(err.to_string().contains("agent odd"), "{err}");
    assert!(err.to_string().contains("status \"sleeping\""), "{err}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

#[test]
fn a_bad_line_anywhere_names_the_file_and_line_and_imports_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let ghost_event = json!({"runId": "r9", "seq": 1, "offset": "1", "eventType": "e", "payload": null,
        "payloadRef": null, "idempotencyKey": null, "createdAt": "2026-05-28T20:26:40.123Z"});
    let cases: Vec<(&str, String, &str, &str)> = vec![
        ("runs.ndjson", "{\"runId\":".into(), "runs.ndjson line 1", "partial write"),
        ("runs.ndjson", "{\"runId\":\n{}\n".into(), "runs.ndjson line 1", "not valid JSON"),
        (
            "agents.ndjson",
            "{\"agentId\":\"a1\",\"cwd\":\"/ws\",\"status\":\"sleeping\",\"createdAt\":1,\"updatedAt\":1}\n".into(),
            "agents.ndjson line 1",
            "status \"sleeping\"",
        ),
        (
            "checkpoints.ndjson",
            "\n{\"agentId\":\"a1\",\"blobId\":\"b\",\"dataBase64\":\"%%%\"}\n".into(),
            "checkpoints.ndjson line 2",
            "base64",
        ),
        (
            "runs.ndjson",
            format!("{}\n", run("ghost", "r1", 1)),
            "runs.ndjson line 1",
            "agent ghost, which is neither in the directory nor in the database",
        ),
        (
            "checkpoints.ndjson",
            "{\"agentId\":\"a1\",\"blobId\":\"b\",\"dataBase64\":\"AA==\"}\n{\"agentId\":\"a1\",\"blobId\":\"b\",\"dataBase64\":\"AA==\"}\n".into(),
            "checkpoints.ndjson line 2",
            "appears twice",
        ),
        ("agents.ndjson", "[1]\n".into(), "agents.ndjson line 1", "not a JSON object"),
        (
            "run_events.ndjson",
            format!("{ghost_event}\n"),
            "run_events.ndjson line 1",
            "the event belongs to run r9",
        ),
        (
            "checkpoints.ndjson",
            "{\"agentId\":\"ghost\",\"blobId\":\"b\",\"dataBase64\":\"AA==\"}\n".into(),
            "checkpoints.ndjson line 1",
            "the checkpoint blob belongs to agent ghost",
        ),
    ];
    for (i, (file, text, place, why)) in cases.iter().enumerate() {
        let dir = tmp.path().join(format!("case{i}"));
        write_store(&dir, 3);
        std::fs::write(dir.join(file), text).unwrap();
        let db = tmp.path().join(format!("case{i}.db"));
        let err = import(&db, &dir, false).unwrap_err();
        assert!(err.contains(place) && err.contains(why), "case {i}: {err}");
        assert!(err.contains("nothing was imported"), "case {i}: {err}");
        if db.exists() {
            for table in ["agents", "runs", "run_events", "checkpoints"] {
                assert_eq!(count(&db, table), 0, "case {i}: {table}");
            }
        }
    }
}

#[test]
fn event_numbering_must_be_one_to_n_with_matching_offsets() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let db = tmp.path().join("x.db");
    let event = |seq: u64, offset: &str, key: Option<&str>| {
        json!({"runId": "r1", "seq": seq, "offset": offset, "eventType": "e", "payload": null,
               "payloadRef": null, "idempotencyKey": key, "createdAt": "2026-05-28T20:26:40.123Z"})
        .to_string()
    };
    for (events, want) in [
        (
            vec![event(1, "1", None), event(3, "3", None)],
            "run_events.ndjson line 2: run r1 has no event with seq 2",
        ),
        (
            vec![event(1, "1", None), event(1, "1", None)],
            "has seq 1 twice",
        ),
        (
            vec![event(1, "2", None)],
            "run_events.ndjson line 1: offset \"2\" does not match seq 1",
        ),
        (
            vec![event(1, "1", Some("k")), event(2, "2", Some("k"))],
            "line 2: idempotencyKey \"k\" is used twice",
        ),
        (
            vec![event(0, "0", None)],
            "seq must be a whole number from 1",
        ),
    ] {
        let _ = std::fs::remove_dir_all(&dir);
        write_store(&dir, 0);
        std::fs::write(dir.join("run_events.ndjson"), events.join("\n") + "\n").unwrap();
        let err = import(&db, &dir, false).unwrap_err();
        assert!(err.contains(want), "{err}");
    }
    let bad_time = json!({"runId": "r1", "seq": 1, "offset": "1", "eventType": "e", "payload": null,
                          "payloadRef": null, "idempotencyKey": null, "createdAt": "yesterday"});
    std::fs::write(dir.join("run_events.ndjson"), format!("{bad_time}\n")).unwrap();
    assert!(import(&db, &dir, false)
        .unwrap_err()
        .contains("createdAt \"yesterday\" is not an ISO 8601 time"));
}

#[test]
fn existing_ids_are_refused_unless_replace_and_replace_swaps_a_runs_events() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let db = tmp.path().join("x.db");
    write_store(&dir, 3);
    import(&db, &dir, false).unwrap();
    let err = import(&db, &dir, false).unwrap_err();
    assert!(err.contains("4 record(s) already exist"), "{err}");
    assert!(
        err.contains("agent a1") && err.contains("--replace"),
        "{err}"
    );
    assert_eq!(count(&db, "run_events"), 3);

    // The same ids with two events: --replace leaves exactly the directory's records.
    std::fs::remove_dir_all(&dir).unwrap();
    write_store(&dir, 2);
    let (ok, stderr) = callbackd(&[
        "import",
        "--db",
        db.to_str().unwrap(),
        dir.to_str().unwrap(),
    ]);
    assert!(!ok && stderr.contains("already exist"), "{stderr}");
    let (ok, stderr) = callbackd(&[
        "import",
        "--replace",
        "--db",
        db.to_str().unwrap(),
        dir.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("1 agents, 1 runs, 2 run events, 1 checkpoint blobs imported"),
        "{stderr}"
    );
    for (table, n) in [
        ("agents", 1),
        ("runs", 1),
        ("run_events", 2),
        ("checkpoints", 1),
    ] {
        assert_eq!(count(&db, table), n, "{table}");
    }
}

#[test]
fn a_directory_that_is_not_a_jsonl_store_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("x.db");
    let err = import(&db, tmp.path(), false).unwrap_err();
    assert!(err.contains("is not a bridge JSONL store"), "{err}");
    let err = import(&db, &tmp.path().join("missing"), false).unwrap_err();
    assert!(err.contains("does not exist"), "{err}");
    let (ok, stderr) = callbackd(&[
        "export",
        "--db",
        tmp.path().join("none.db").to_str().unwrap(),
        "out",
    ]);
    assert!(!ok && stderr.contains("does not exist"), "{stderr}");
}
