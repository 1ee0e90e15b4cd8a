//! `callbackd export` / `import`: a round trip keeps every record, and bad directories are
//! refused whole, naming the file and line.

use std::path::Path;
use std::process::Command;

use callbackd::store::backend::BackendOptions;
use callbackd::store::postgres::PgOptions;
use callbackd::store::sqlite::SqliteOptions;
use callbackd::store::StoreCall;
use callbackd::transfer::{jsonl_export, jsonl_import};
use callbackd::Namespace;
use serde_json::{json, Value};

use crate::helpers::{agent, backend, run, Backend, TestApp};

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

/// The store of `app`, as `callbackd export` is given it.
fn store_of(app: &TestApp) -> BackendOptions {
    match &app.pg {
        Some(pg) => {
            let mut opts = PgOptions::new(pg.url.clone());
            opts.schema = Some(pg.schema.clone());
            BackendOptions::Postgres(opts)
        }
        None => BackendOptions::Sqlite(SqliteOptions::new(&app.db)),
    }
}

/// Agents, runs, events and blobs written in an order that is not their key order (runs
/// interleaved, ids whose bytewise order differs from a locale's), with a pretty-printed
/// document and events with and without payloads, keys and refs; the events' times fixed.
async fn fill_for_export(app: &TestApp) {
    let agents = ["zed", "B", "a", "\u{e9}t\u{e9}", "A-1"];
    for (i, id) in agents.iter().enumerate() {
        app.store_ok(
            "agents",
            "create",
            json!({"agent": agent(id, &format!("/ws/{i}"), 1_780_000_000_000 + i as i64)}),
        )
        .await;
    }
    let pretty = "{\n  \"agentId\": \"m\",\n  \"cwd\": \"/ws\",\n  \"status\": \"idle\",\n  \"createdAt\": 1,\n  \"updatedAt\": 2.50,\n  \"x\": {\"k\": 1, \"k\": 2}\n}";
    let body = format!(r#"{{"substore":"agents","method":"create","input":{{"agent":{pretty}}}}}"#);
    assert_eq!(
        app.store_raw(body, crate::helpers::Framing::Chunked)
            .await
            .status,
        200
    );
    let mut runs = Vec::new();
    for id in agents.iter().rev() {
        for turn in [2, 1] {
            let run_id = format!("r-{id}-{turn}");
            app.store_ok("runs", "create", json!({"run": run(id, &run_id, turn)}))
                .await;
            runs.push(run_id);
        }
    }
    for e in 0..4 {
        for (k, run_id) in runs.iter().enumerate() {
            let mut input = json!({"runId": run_id, "eventType": "step"});
            if (e + k) % 3 != 0 {
                input["payload"] = json!({"e": e, "s": "ü \"q\"\n", "n": 1.50});
            }
            if e % 2 == 0 {
                input["idempotencyKey"] = json!(format!("k{e}"));
            }
            if k % 4 == 1 {
                input["payloadRef"] = json!("ref");
            }
            app.store_ok("runEvents", "append", input).await;
        }
    }
    for id in agents {
        for blob in ["b2", "B0", "b1"] {
            let data = base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                (0..=255u8)
                    .cycle()
                    .skip(blob.len() + id.len())
                    .take(300)
                    .collect::<Vec<_>>(),
            );
            app.store_ok(
                "checkpoints",
                "create",
                json!({"agentId": id, "blobId": blob, "data": data}),
            )
            .await;
        }
    }
    // The daemon stamps appends with the time; the two stores must hold the same data.
    let fix = "UPDATE run_events SET created_at = 1780000000000 + seq * 1001";
    app.exec(fix, fix).await;
}

/// A PostgreSQL store (on a PostgreSQL run; SQLite otherwise) and a SQLite file holding
/// the same data export to the same bytes, file by file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_is_the_same_bytes_from_either_backend() {
    let app = TestApp::spawn().await;
    let sqlite = TestApp::spawn_sqlite().await;
    assert_eq!(app.pg.is_some(), backend() == Backend::Postgres);
    fill_for_export(&app).await;
    fill_for_export(&sqlite).await;

    let ns = Namespace::default();
    let from_app = app.dir.path().join("out");
    let from_sqlite = sqlite.dir.path().join("out");
    let counts = jsonl_export::export_from(&store_of(&app), &ns, &from_app)
        .await
        .unwrap();
    assert_eq!(
        counts.to_string(),
        "6 agents, 10 runs, 40 run events, 15 checkpoint blobs"
    );
    let sqlite_counts = jsonl_export::export(&sqlite.db, &ns, &from_sqlite).unwrap();
    assert_eq!(counts, sqlite_counts);
    for name in [
        "agents.ndjson",
        "runs.ndjson",
        "run_events.ndjson",
        "checkpoints.ndjson",
    ] {
        let a = std::fs::read(from_app.join(name)).unwrap();
        let b = std::fs::read(from_sqlite.join(name)).unwrap();
        assert!(!a.is_empty(), "{name} is empty");
        assert!(
            a == b,
            "{name} differs:\n{}\n---\n{}",
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b)
        );
    }

    // Key order, ids bytewise: what the bridge needs is each run's events together, 1..n.
    let lines = |name: &str| -> Vec<Value> {
        std::fs::read_to_string(from_app.join(name))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let ids: Vec<String> = lines("agents.ndjson")
        .iter()
        .map(|a| a["agentId"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, ["A-1", "B", "a", "m", "zed", "\u{e9}t\u{e9}"]);
    let events: Vec<(String, u64)> = lines("run_events.ndjson")
        .iter()
        .map(|e| {
            (
                e["runId"].as_str().unwrap().to_string(),
                e["seq"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut sorted = events.clone();
    sorted.sort();
    assert_eq!(events, sorted);
    assert_eq!(
        events[..4].iter().map(|e| e.1).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    assert_eq!(
        lines("agents.ndjson")[3].to_string(),
        r#"{"agentId":"m","createdAt":1,"cwd":"/ws","status":"idle","updatedAt":2.5,"x":{"k":2}}"#
    );
    let raw = std::fs::read_to_string(from_app.join("agents.ndjson")).unwrap();
    assert!(
        raw.contains(r#"{"agentId":"m","cwd":"/ws","status":"idle","createdAt":1,"updatedAt":2.50,"x":{"k":1,"k":2}}"#),
        "{raw}"
    );

    // What the export wrote imports back whole, into a fresh SQLite file.
    let db2 = app.dir.path().join("second.db");
    assert_eq!(import(&db2, &from_app, false).unwrap(), counts.to_string());
}

/// `callbackd export --namespace N` of a store with two namespaces (PostgreSQL on a
/// PostgreSQL run) writes N's rows and nothing of the other's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_of_one_namespace_holds_only_its_rows() {
    let app = TestApp::spawn().await;
    let put = |ns: &'static str, sub: &'static str, method: &'static str, input: Value| {
        let store = app.store.clone();
        async move {
            let call = StoreCall::parse(sub, method, &input.to_string()).unwrap();
            store.call(&Namespace::new(ns), call).await.unwrap();
        }
    };
    for (ns, tag) in [("default", "d"), ("team-b", "t")] {
        for i in 0..2 {
            let a = format!("{tag}-agent-{i}");
            let r = format!("{tag}-run-{i}");
            put(
                ns,
                "agents",
                "create",
                json!({"agent": agent(&a, "/ws", 1_780_000_000_000)}),
            )
            .await;
            put(ns, "runs", "create", json!({"run": run(&a, &r, 1)})).await;
            for e in 0..3 {
                put(
                    ns,
                    "runEvents",
                    "append",
                    json!({"runId": r, "eventType": tag, "payload": {"e": e}}),
                )
                .await;
            }
            put(
                ns,
                "checkpoints",
                "create",
                json!({"agentId": a, "blobId": format!("{tag}-blob"), "data": "AAEC"}),
            )
            .await;
        }
    }
    // The same ids in both namespaces too: only the exported namespace's copy goes.
    put(
        "team-b",
        "agents",
        "create",
        json!({"agent": agent("d-agent-0", "/other", 1)}),
    )
    .await;

    // Through the command line, with the store in a config file (the schema is no flag).
    let config = app.dir.path().join("callbackd.toml");
    let store = match &app.pg {
        Some(pg) => format!(
            "backend = \"postgres\"\nurl = {:?}\nschema = {:?}\n",
            pg.url, pg.schema
        ),
        None => format!("path = {:?}\n", app.db.to_str().unwrap()),
    };
    std::fs::write(&config, format!("[store]\n{store}")).unwrap();
    let export = |ns: &str, dir: &Path| {
        let out = Command::new(BIN)
            .args([
                "export",
                "--config",
                config.to_str().unwrap(),
                "--namespace",
                ns,
            ])
            .arg(dir)
            .env_remove("CALLBACKD_CONFIG")
            .env_remove("CALLBACKD_STORE_URL")
            .env_remove("CALLBACKD_DB")
            .output()
            .expect("run callbackd");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let team = app.dir.path().join("team-b");
    let said = export("team-b", &team);
    assert!(
        said.contains("namespace team-b: 3 agents, 2 runs, 6 run events, 2 checkpoint blobs"),
        "{said}"
    );
    let read = |dir: &Path, name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    let agents = read(&team, "agents.ndjson");
    assert_eq!(agents.lines().count(), 3);
    // team-b's own d-agent-0 (cwd /other), not default's.
    let first: Value = serde_json::from_str(agents.lines().next().unwrap()).unwrap();
    assert_eq!(
        (first["agentId"].as_str(), first["cwd"].as_str()),
        (Some("d-agent-0"), Some("/other"))
    );
    for name in [
        "agents.ndjson",
        "runs.ndjson",
        "run_events.ndjson",
        "checkpoints.ndjson",
    ] {
        let text = read(&team, name);
        assert!(!text.is_empty(), "{name}");
        for line in text.lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            let id = v
                .get("runId")
                .or_else(|| v.get("agentId"))
                .and_then(Value::as_str)
                .unwrap();
            assert!(
                id.starts_with("t-") || (name == "agents.ndjson" && id == "d-agent-0"),
                "{name}: {line}"
            );
        }
    }
    assert!(!read(&team, "run_events.ndjson").contains(r#""eventType":"d""#));
    assert!(!read(&team, "checkpoints.ndjson").contains("d-blob"));

    let default = app.dir.path().join("default");
    let said = export("default", &default);
    assert!(
        said.contains("namespace default: 2 agents, 2 runs, 6 run events, 2 checkpoint blobs"),
        "{said}"
    );
    assert!(!read(&default, "agents.ndjson").contains("/other"));
    assert!(!read(&default, "runs.ndjson").contains("\"t-"));
    assert!(!read(&default, "run_events.ndjson").contains("\"t-run-"));
    // A namespace with nothing in it: four empty files.
    let empty = app.dir.path().join("empty");
    export("nobody", &empty);
    for name in [
        "agents.ndjson",
        "runs.ndjson",
        "run_events.ndjson",
        "checkpoints.ndjson",
    ] {
        assert_eq!(read(&empty, name), "", "{name}");
    }
}

/// An export from a PostgreSQL server that cannot be reached says so, without the password,
/// and leaves the directory empty.
#[tokio::test]
async fn export_from_an_unreachable_postgres_names_it_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut opts = PgOptions::new("postgres://u:s3cret@127.0.0.1:1/x");
    opts.connect_timeout = std::time::Duration::from_secs(2);
    let err = jsonl_export::export_pg(&opts, &Namespace::default(), &out)
        .await
        .unwrap_err();
    let text = format!("{:#}", anyhow::Error::from(err));
    assert!(
        text.contains("cannot connect to PostgreSQL at postgres://u:***@127.0.0.1:1/x"),
        "{text}"
    );
    assert!(!text.contains("s3cret"), "{text}");
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
}
