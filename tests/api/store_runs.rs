//! `runs.*`: both ids must match, whole replace, turn order, cursor paging, cascades.

use serde_json::{json, Value};

use crate::helpers::{run, Framing, TestApp};

#[tokio::test]
async fn get_needs_both_ids_to_match() {
    let app = TestApp::spawn().await;
    let doc = run("a", "run-1", 1);
    assert_eq!(
        app.store_ok("runs", "create", json!({"run": doc})).await,
        Some(doc.clone())
    );
    assert_eq!(
        app.store_ok("runs", "get", json!({"agentId": "a", "runId": "run-1"}))
            .await,
        Some(doc)
    );
    assert_eq!(
        app.store_ok("runs", "get", json!({"agentId": "b", "runId": "run-1"}))
            .await,
        None
    );
}

#[tokio::test]
async fn create_existing_and_update_missing_are_errors() {
    let app = TestApp::spawn().await;
    app.store_ok("runs", "create", json!({"run": run("a", "r", 1)}))
        .await;
    let (code, msg) = app
        .store_err("runs", "create", json!({"run": run("a", "r", 1)}))
        .await;
    assert_eq!(code, "already_exists");
    assert!(msg.contains("run r already exists for agent a"), "{msg}");
    let (code, msg) = app
        .store_err("runs", "update", json!({"run": run("a", "zz", 1)}))
        .await;
    assert_eq!(code, "not_found");
    assert!(msg.contains("run zz not found for agent a"), "{msg}");
}

#[tokio::test]
async fn update_replaces_the_whole_run() {
    let app = TestApp::spawn().await;
    app.store_ok("runs", "create", json!({"run": run("a", "r", 1)}))
        .await;
    let mut finished = run("a", "r", 1);
    finished["status"] = json!("finished");
    finished["result"] = json!("done");
    finished["latestCheckpointRef"] = json!({"schemaVersion": 1, "rootBlobId": "ab".repeat(32)});
    app.store_ok("runs", "update", json!({"run": finished}))
        .await;
    assert_eq!(
        app.store_ok("runs", "get", json!({"agentId": "a", "runId": "r"}))
            .await,
        Some(finished)
    );
}

#[tokio::test]
async fn list_is_oldest_turn_first_and_pages_by_cursor() {
    let app = TestApp::spawn().await;
    for (id, turn) in [("run-c", 2), ("run-a", 3), ("run-b", 1), ("run-d", 2)] {
        app.store_ok("runs", "create", json!({"run": run("a", id, turn)}))
            .await;
    }
    app.store_ok("runs", "create", json!({"run": run("other", "run-x", 1)}))
        .await;
    let mut seen = Vec::new();
    let mut filter = json!({"agentIds": ["a"], "limit": 3});
    loop {
        let out = app
            .store_ok("runs", "list", json!({"filter": filter.clone()}))
            .await
            .unwrap();
        seen.extend(
            out["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["runId"].as_str().unwrap().to_string()),
        );
        match out.get("nextCursor") {
            Some(Value::String(c)) => filter["cursor"] = json!(c),
            _ => break,
        }
    }
    assert_eq!(seen, ["run-b", "run-c", "run-d", "run-a"]);
}

#[tokio::test]
async fn list_filters_are_anded_and_empty_lists_do_not_constrain() {
    let app = TestApp::spawn().await;
    app.store_ok("runs", "create", json!({"run": run("a", "r1", 1)}))
        .await;
    app.store_ok("runs", "create", json!({"run": run("b", "r2", 1)}))
        .await;
    let ids = |v: Value| -> Vec<String> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["runId"].as_str().unwrap().to_string())
            .collect()
    };
    let both = app
        .store_ok(
            "runs",
            "list",
            json!({"filter": {"agentIds": ["a", "b"], "runIds": ["r2"]}}),
        )
        .await;
    assert_eq!(ids(both.unwrap()), ["r2"]);
    let none = app
        .store_ok(
            "runs",
            "list",
            json!({"filter": {"agentIds": ["a"], "runIds": ["r2"]}}),
        )
        .await;
    assert_eq!(ids(none.unwrap()), Vec::<String>::new());
    let all = app
        .store_ok(
            "runs",
            "list",
            json!({"filter": {"agentIds": [], "runIds": []}}),
        )
        .await;
    assert_eq!(ids(all.unwrap()).len(), 2);
}

#[tokio::test]
async fn delete_cascades_to_events_and_is_silent_when_nothing_matches() {
    let app = TestApp::spawn().await;
    app.store_ok("runs", "create", json!({"run": run("a", "r1", 1)}))
        .await;
    app.store_ok("runs", "create", json!({"run": run("a", "r2", 2)}))
        .await;
    for r in ["r1", "r2"] {
        app.store_ok("runEvents", "append", json!({"runId": r, "eventType": "e"}))
            .await;
    }
    assert_eq!(
        app.store_ok("runs", "delete", json!({"filter": {"runIds": ["r1"]}}))
            .await,
        None
    );
    assert_eq!(app.count("SELECT count(*) FROM runs").await, 1);
    assert_eq!(
        app.count("SELECT count(*) FROM run_events WHERE run_id = 'r1'")
            .await,
        0
    );
    assert_eq!(
        app.count("SELECT count(*) FROM run_events WHERE run_id = 'r2'")
            .await,
        1
    );
    assert_eq!(
        app.store_ok(
            "runs",
            "delete",
            json!({"filter": {"agentIds": ["nobody"]}})
        )
        .await,
        None
    );
    assert_eq!(app.count("SELECT count(*) FROM runs").await, 1);
}

#[tokio::test]
async fn runs_work_over_the_proto_codec_and_content_length_bodies() {
    let app = TestApp::spawn().await;
    let doc = run("a", "r", 1);
    assert_eq!(
        app.store_proto("runs", "create", json!({"run": doc}))
            .await
            .unwrap(),
        Some(doc.clone())
    );
    assert_eq!(
        app.store_proto("runs", "update", json!({"run": doc}))
            .await
            .unwrap(),
        Some(doc.clone())
    );
    assert_eq!(
        app.store_proto("runs", "get", json!({"agentId": "a", "runId": "r"}))
            .await
            .unwrap(),
        Some(doc.clone())
    );
    let list = app
        .store_proto("runs", "list", json!({"filter": {"agentIds": ["a"]}}))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(list["items"], json!([doc]));
    let resp = app
        .call_store_framed(
            "runs",
            "get",
            json!({"agentId": "a", "runId": "r"}),
            Framing::ContentLength,
        )
        .await;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.json()["output"], doc);
    assert_eq!(
        app.store_proto("runs", "delete", json!({"filter": {"runIds": ["r"]}}))
            .await
            .unwrap(),
        None
    );
    assert_eq!(app.count("SELECT count(*) FROM runs").await, 0);
}
