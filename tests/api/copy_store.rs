//! `callbackd copy-store`: SQLite -> PostgreSQL -> SQLite (on a PostgreSQL run; SQLite ->
//! SQLite -> SQLite otherwise) gives back the same rows, byte for byte, the middle store
//! answers every read with the same bytes as the first, and a non-empty target is refused.

use std::path::Path;
use std::process::Command;

use callbackd::Namespace;
use serde_json::json;

use crate::helpers::{backend, Backend, PgTarget, TestApp};

/// Every row of every table of a SQLite file, as comparable text (blobs in hex).
fn dump(db: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut out = Vec::new();
    for sql in [
        "SELECT ns || '|' || agent_id || '|' || cwd || '|' || updated_at || '|' || doc FROM agents ORDER BY ns, agent_id",
        "SELECT ns || '|' || agent_id || '|' || run_id || '|' || turn_number || '|' || doc FROM runs ORDER BY 1",
        "SELECT ns || '|' || run_id || '|' || seq || '|' || event_type || '|' || payload || '|' || \
         coalesce(payload_ref, '<null>') || '|' || coalesce(idempotency_key, '<null>') || '|' || created_at \
         FROM run_events ORDER BY ns, run_id, seq",
        "SELECT ns || '|' || agent_id || '|' || blob_id || '|' || hex(data) || '|' || crc32 FROM checkpoints ORDER BY 1",
        "SELECT ns || '|' || agent_id || '|' || key || '|' || value || '|' || updated_at FROM memory_notes ORDER BY 1",
        "SELECT id || '|' || ns || '|' || agent_id || '|' || coalesce(run_id, '<null>') || '|' || \
         coalesce(tool_call_id, '<null>') || '|' || tool || '|' || started_at || '|' || \
         coalesce(ended_at, '<null>') || '|' || outcome || '|' || cut_off || '|' || \
         coalesce(waited_ms, '<null>') || '|' || coalesce(arguments, '<null>') || '|' || \
         coalesce(result, '<null>') FROM tool_calls ORDER BY id",
        "SELECT ns || '|' || run_id || '|' || seq || '|' || delta FROM event_meta ORDER BY 1",
        "SELECT ns || '|' || run_id || '|' || expired_through || '|' || pruned_at FROM run_expiry ORDER BY 1",
        "SELECT id || '|' || ns || '|' || agent_id || '|' || coalesce(run_id, '<null>') || '|' || tool || '|' || \
         coalesce(tool_call_id, '<null>') || '|' || args || '|' || created_at || '|' || expires_at || '|' || \
         state || '|' || coalesce(decided_by, '<null>') || '|' || coalesce(decided_at, '<null>') || '|' || \
         coalesce(reason, '<null>') || '|' || owner || '|' || lease_until || '|' || \
         coalesce(approved_args, '<null>') || '|' || confirm FROM approvals ORDER BY id",
    ] {
        let mut stmt = conn.prepare(sql).unwrap();
        let rows = stmt.query_map([], |r| r.get::<_, String>(0)).unwrap();
        out.extend(rows.map(Result::unwrap));
    }
    out
}

fn copy(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_callbackd"))
        .arg("copy-store")
        .args(args)
        .output()
        .expect("run copy-store")
}

/// The raw bodies of the reads a bridge makes, for a byte comparison.
async fn reads(app: &TestApp) -> Vec<String> {
    let mut out = Vec::new();
    for (sub, method, input) in [
        ("agents", "list", json!({"filter": {"limit": 1000}})),
        ("agents", "get", json!({"agentId": "a-1"})),
        ("runs", "list", json!({"filter": {"limit": 2}})),
        ("runEvents", "list", json!({"runId": "r-1", "limit": 7})),
        ("runEvents", "list", json!({"runId": "r-2"})),
        ("checkpoints", "list", json!({"filter": {}})),
        (
            "checkpoints",
            "get",
            json!({"agentId": "a-1", "blobId": "b-1"}),
        ),
    ] {
        out.push(app.call_store(sub, method, input).await.text());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_trip_through_the_other_backend_gives_back_every_byte() {
    let dir = tempfile::tempdir().unwrap();
    let (src, back) = (dir.path().join("src.db"), dir.path().join("back.db"));
    let src_str = src.to_str().unwrap().to_string();
    // The source is always SQLite.
    let app = TestApp::spawn_with(|c| {
        c.store.set_location(&src_str);
        c.store.schema = None;
    })
    .await;
    for i in 0..3 {
        // Key order, duplicate keys, number spellings, escapes: kept as sent.
        let doc = format!(
            r#"{{"updatedAt":{},"agentId":"a-{i}","cwd":"/w","n":1.50,"x":{{"k":1,"k":2}},"u":"\u00e9\ud83d\ude00"}}"#,
            1_780_000_000_000i64 + i
        );
        let body =
            format!(r#"{{"substore":"agents","method":"create","input":{{"agent":{doc}}}}}"#);
        assert_eq!(
            app.store_raw(body, crate::helpers::Framing::Chunked)
                .await
                .status,
            200
        );
        app.store_ok(
            "runs",
            "create",
            json!({"run": crate::helpers::run(&format!("a-{i}"), &format!("r-{i}"), i)}),
        )
        .await;
        for e in 0..(10 * (i + 1)) {
            app.store_ok(
                "runEvents",
                "append",
                json!({"runId": format!("r-{i}"), "eventType": "step", "payload": {"e": e, "t": "x\n"},
                       "payloadRef": if e % 4 == 0 { Some("ref") } else { None },
                       "idempotencyKey": if e % 3 == 0 { Some(format!("k{e}")) } else { None }}),
            )
            .await;
        }
        let data = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            (0..=255u8)
                .cycle()
                .take(5000 + i as usize)
                .collect::<Vec<_>>(),
        );
        app.store_ok(
            "checkpoints",
            "create",
            json!({"agentId": format!("a-{i}"), "blobId": format!("b-{i}"), "data": data}),
        )
        .await;
        app.store
            .tool_data()
            .memory_set(
                &Namespace::default(),
                &format!("a-{i}"),
                "note",
                "kept",
                256,
            )
            .await
            .unwrap();
    }
    // The run API's records go along too.
    let records = app.store.clone().run_records();
    for i in 0..3 {
        let id = records
            .tool_call_started(
                &Namespace::default(),
                callbackd::store::records::ToolCallStart {
                    agent_id: format!("a-{i}"),
                    run_id: Some(format!("r-{i}")),
                    tool_call_id: (i > 0).then(|| format!("call-{i}")),
                    tool: "echo".into(),
                    started_at_ms: 1_780_000_000_000 + i,
                },
                i == 0,
            )
            .await
            .unwrap();
        if i == 0 {
            // Held, then approved with edited arguments: the wait and what ran go along.
            records
                .tool_call_resumed(id, Some(serde_json::json!({"text": "edited"})))
                .await
                .unwrap();
        }
        if i < 2 {
            records
                .tool_call_ended(
                    id,
                    callbackd::store::records::ToolOutcome::Ok,
                    i == 1,
                    1_780_000_000_500,
                    (i == 0).then(|| serde_json::json!({"echo": "edited"})),
                )
                .await
                .unwrap();
        }
        records
            .snapshot_delta(
                &Namespace::default(),
                &format!("r-{i}"),
                2,
                Some(7 + i as u32),
            )
            .await
            .unwrap();
    }
    drop(records);
    let before = reads(&app).await;
    drop(app.stop().await);
    rusqlite::Connection::open(&src)
        .unwrap()
        .execute_batch(
            "INSERT INTO run_expiry VALUES ('default', 'r-old', 41, 1780000000000); \
             INSERT INTO approvals (id, ns, agent_id, run_id, tool, tool_call_id, args, \
               created_at, expires_at, state, decided_by, decided_at, reason, owner, lease_until, \
               approved_args, confirm) VALUES ('ap-1', 'default', 'a-0', 'r-0', 'echo', 'call-1', \
               '{\"text\":\"hi\",\"n\":1.50}', 1780000000000, 1780000060000, 'approved', 'alice', \
               1780000001000, 'fine', 'own_a', 1780000015000, '{\"text\":\"edited\"}', 1), \
             ('ap-2', 'default', 'a-1', NULL, 'echo', NULL, '{}', 1780000000000, 1780000060000, \
               'denied', NULL, NULL, NULL, 'own_b', 1780000002000, NULL, 0)",
        )
        .unwrap();

    // The middle: PostgreSQL on a PostgreSQL run, another SQLite file otherwise.
    let pg = (backend() == Backend::Postgres).then(|| PgTarget::for_dir(dir.path()));
    let mid_path = dir.path().join("mid.db");
    let (mid, mid_schema): (String, Vec<&str>) = match &pg {
        Some(pg) => (pg.url.clone(), vec![pg.schema.as_str()]),
        None => (mid_path.to_str().unwrap().to_string(), vec![]),
    };
    let mut to_mid = vec!["--from", &src_str, "--to", &mid, "--batch", "7"];
    let mut from_mid = vec![
        "--from",
        &mid,
        "--to",
        back.to_str().unwrap(),
        "--batch",
        "5",
    ];
    if let Some(schema) = mid_schema.first() {
        to_mid.extend(["--to-schema", schema]);
        from_mid.extend(["--from-schema", schema]);
    }
    let out = copy(&to_mid);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("60 run_events") && said.contains("3 checkpoint blobs verified"),
        "{said}"
    );

    // A second copy into the same target is refused and changes nothing.
    let again = copy(&to_mid);
    assert!(!again.status.success());
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(
        err.contains("not empty") && err.contains("3 agents"),
        "{err}"
    );

    let out = copy(&from_mid);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        dump(&src),
        dump(&back),
        "SQLite -> middle -> SQLite is byte-equal"
    );
    assert!(dump(&src).len() > 60);

    // The middle store answers the same bytes, and appends continue after the copied seqs.
    let mid_dir = tempfile::tempdir().unwrap();
    if let Some(pg) = &pg {
        std::fs::write(mid_dir.path().join("pg-schema"), &pg.schema).unwrap();
    }
    let mid_app = TestApp::spawn_in(mid_dir, |c| {
        if pg.is_none() {
            c.store.set_location(&mid);
        }
    })
    .await;
    assert_eq!(reads(&mid_app).await, before);
    // The approvals' owner, lease, edited arguments and confirm mark came across.
    let ap = mid_app.api_get("/v1/approvals/ap-1").await.json();
    assert_eq!(ap["approved_args"], json!({"text": "edited"}), "{ap}");
    assert_eq!(
        (ap["edited"].clone(), ap["confirm"].clone()),
        (json!(true), json!(true)),
        "{ap}"
    );
    let ap2 = mid_app.api_get("/v1/approvals/ap-2").await.json();
    assert_eq!(ap2["confirm"], false, "{ap2}");
    let next = mid_app
        .store_ok(
            "runEvents",
            "append",
            json!({"runId": "r-0", "eventType": "e"}),
        )
        .await
        .unwrap();
    assert_eq!(next["seq"], 11);
}

/// `copy-store` from a SQLite source holding what `substore.method(input)` stored, damaged
/// by `damage` (SQL run on the file with the daemon stopped): the copy fails; its stderr.
async fn copy_of_damaged_source(
    substore: &str,
    method: &str,
    input: serde_json::Value,
    damage: &str,
) -> String {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.db").to_str().unwrap().to_string();
    let app = TestApp::spawn_with(|c| {
        c.store.set_location(&src);
        c.store.schema = None;
    })
    .await;
    app.store_ok(substore, method, input).await;
    drop(app.stop().await);
    rusqlite::Connection::open(&src)
        .unwrap()
        .execute_batch(damage)
        .unwrap();
    let target = dir.path().join("t.db");
    let out = copy(&["--from", &src, "--to", target.to_str().unwrap()]);
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn a_corrupted_source_blob_stops_the_copy_naming_it() {
    let err = copy_of_damaged_source(
        "checkpoints",
        "create",
        json!({"agentId": "a", "blobId": "precious", "data": "AAECAw=="}),
        "UPDATE checkpoints SET data = X'00010205'",
    )
    .await;
    assert!(
        err.contains("precious") && err.contains("checksum"),
        "{err}"
    );
    let missing = copy(&["--from", "/nonexistent/x.db", "--to", "y.db"]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("does not exist"));
}

/// A stored document that is not JSON stops the copy with the table's name (the JSON guard
/// of the shared reader, store/sql/transfer.rs).
#[tokio::test]
async fn a_source_document_that_is_not_json_stops_the_copy_naming_its_table() {
    let err = copy_of_damaged_source(
        "agents",
        "create",
        json!({"agent": crate::helpers::agent("a-1", "/ws", 1)}),
        "UPDATE agents SET doc = '{\"agentId\": '",
    )
    .await;
    assert!(
        err.contains("agents") && err.contains("not valid JSON"),
        "{err}"
    );
}
