//! `agents.*`: get/create/update/delete/list semantics, over JSON and proto.

use serde_json::{json, Value};

use crate::helpers::{agent, run, TestApp};

#[tokio::test]
async fn get_of_a_missing_agent_is_an_unset_output() {
    let app = TestApp::spawn().await;
    let resp = app
        .call_store("agents", "get", json!({"agentId": "nope"}))
        .await;
    assert_eq!(resp.status, 200);
    // `{"output":{}}` would be a present, empty document: CreateAgent would then fail.
    assert_eq!(resp.text(), "{}");
}

#[tokio::test]
async fn create_returns_the_bare_document_and_get_reads_it_back() {
    let app = TestApp::spawn().await;
    let doc = agent("agent-1", "/ws", 1000);
    let out = app
        .store_ok("agents", "create", json!({"agent": doc}))
        .await;
    assert_eq!(out, Some(doc.clone()));
    assert_eq!(
        app.store_ok("agents", "get", json!({"agentId": "agent-1"}))
            .await,
        Some(doc)
    );
}

#[tokio::test]
async fn creating_an_existing_agent_is_already_exists_and_keeps_the_first() {
    let app = TestApp::spawn().await;
    app.store_ok("agents", "create", json!({"agent": agent("a", "/ws", 1)}))
        .await;
    let (code, message) = app
        .store_err(
            "agents",
            "create",
            json!({"agent": agent("a", "/other", 2)}),
        )
        .await;
    assert_eq!(code, "already_exists");
    assert!(message.contains("agent a already exists"), "{message}");
    let got = app
        .store_ok("agents", "get", json!({"agentId": "a"}))
        .await
        .unwrap();
    assert_eq!(got["cwd"], "/ws");
}

#[tokio::test]
async fn update_replaces_the_whole_document() {
    let app = TestApp::spawn().await;
    let mut doc = agent("a", "/ws", 1);
    doc["hostExtra"] = json!({"keep": "me"});
    app.store_ok("agents", "create", json!({"agent": doc}))
        .await;
    let replacement = json!({"agentId": "a", "cwd": "/ws", "updatedAt": 2, "status": "archived"});
    let out = app
        .store_ok("agents", "update", json!({"agent": replacement}))
        .await;
    assert_eq!(out, Some(replacement.clone()));
    let got = app
        .store_ok("agents", "get", json!({"agentId": "a"}))
        .await
        .unwrap();
    assert_eq!(got, replacement, "no merge with the old document");
}

#[tokio::test]
async fn updating_a_missing_agent_is_not_found() {
    let app = TestApp::spawn().await;
    let (code, message) = app
        .store_err(
            "agents",
            "update",
            json!({"agent": agent("ghost", "/ws", 1)}),
        )
        .await;
    assert_eq!(code, "not_found");
    assert!(message.contains("agent ghost not found"), "{message}");
    assert_eq!(app.count("SELECT count(*) FROM agents").await, 0);
}

#[tokio::test]
async fn list_sorts_by_updated_at_then_agent_id_descending_within_cwd() {
    let app = TestApp::spawn().await;
    for (id, cwd, t) in [
        ("a", "/w1", 5),
        ("b", "/w1", 7),
        ("c", "/w1", 5),
        ("d", "/w2", 9),
    ] {
        app.store_ok("agents", "create", json!({"agent": agent(id, cwd, t)}))
            .await;
    }
    let out = app
        .store_ok("agents", "list", json!({"filter": {"cwd": "/w1"}}))
        .await
        .unwrap();
    let ids: Vec<&str> = out["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["agentId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["b", "c", "a"]);
    assert!(out.get("nextCursor").is_none());
    let all = app.store_ok("agents", "list", json!({})).await.unwrap();
    assert_eq!(all["items"].as_array().unwrap().len(), 4);
}

#[tokio::test]
async fn list_pages_with_a_cursor_until_no_items_remain() {
    let app = TestApp::spawn().await;
    for i in 0..7 {
        // Ties on updatedAt exercise the agentId tie-break across page boundaries.
        app.store_ok(
            "agents",
            "create",
            json!({"agent": agent(&format!("agent-{i}"), "/ws", i / 3)}),
        )
        .await;
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut filter = json!({"cwd": "/ws", "limit": 3});
        if let Some(c) = &cursor {
            filter["cursor"] = json!(c);
        }
        let out = app
            .store_ok("agents", "list", json!({"filter": filter}))
            .await
            .unwrap();
        let items = out["items"].as_array().unwrap();
        assert!(
            !items.is_empty(),
            "never an empty page with a cursor before it"
        );
        seen.extend(
            items
                .iter()
                .map(|a| a["agentId"].as_str().unwrap().to_string()),
        );
        pages += 1;
        match out.get("nextCursor") {
            Some(Value::String(c)) => cursor = Some(c.clone()),
            None => break,
            other => panic!("bad nextCursor {other:?}"),
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(
        seen,
        ["agent-6", "agent-5", "agent-4", "agent-3", "agent-2", "agent-1", "agent-0"]
    );
}

#[tokio::test]
async fn a_full_last_page_has_no_cursor_and_limit_zero_is_an_empty_page() {
    let app = TestApp::spawn().await;
    for i in 0..2 {
        app.store_ok(
            "agents",
            "create",
            json!({"agent": agent(&format!("a{i}"), "/ws", i)}),
        )
        .await;
    }
    let out = app
        .store_ok("agents", "list", json!({"filter": {"limit": 2}}))
        .await
        .unwrap();
    assert_eq!(out["items"].as_array().unwrap().len(), 2);
    assert!(out.get("nextCursor").is_none());
    let out = app
        .store_ok("agents", "list", json!({"filter": {"limit": 0}}))
        .await
        .unwrap();
    assert_eq!(out, json!({"items": []}));
}

#[tokio::test]
async fn list_defaults_to_fifty_items() {
    let app = TestApp::spawn().await;
    for i in 0..55 {
        app.store_ok(
            "agents",
            "create",
            json!({"agent": agent(&format!("a{i:02}"), "/ws", i)}),
        )
        .await;
    }
    let out = app
        .store_ok("agents", "list", json!({"filter": {"cwd": "/ws"}}))
        .await
        .unwrap();
    assert_eq!(out["items"].as_array().unwrap().len(), 50);
    assert!(out["nextCursor"].is_string());
}

#[tokio::test]
async fn delete_removes_the_agent_with_its_runs_events_and_checkpoints_and_is_idempotent() {
    let app = TestApp::spawn().await;
    for id in ["a", "b"] {
        app.store_ok("agents", "create", json!({"agent": agent(id, "/ws", 1)}))
            .await;
        app.store_ok(
            "runs",
            "create",
            json!({"run": run(id, &format!("run-{id}"), 1)}),
        )
        .await;
        app.store_ok(
            "runEvents",
            "append",
            json!({"runId": format!("run-{id}"), "eventType": "e"}),
        )
        .await;
        app.store_ok(
            "checkpoints",
            "create",
            json!({"agentId": id, "blobId": "ab", "data": "AAE="}),
        )
        .await;
    }
    assert_eq!(
        app.store_ok("agents", "delete", json!({"filter": {"agentIds": ["a"]}}))
            .await,
        None
    );
    for table in ["agents", "runs", "checkpoints"] {
        assert_eq!(
            app.count(&format!(
                "SELECT count(*) FROM {table} WHERE agent_id = 'a'"
            ))
            .await,
            0,
            "{table}"
        );
        assert_eq!(
            app.count(&format!(
                "SELECT count(*) FROM {table} WHERE agent_id = 'b'"
            ))
            .await,
            1,
            "{table}"
        );
    }
    assert_eq!(
        app.count("SELECT count(*) FROM run_events WHERE run_id = 'run-a'")
            .await,
        0
    );
    assert_eq!(
        app.count("SELECT count(*) FROM run_events WHERE run_id = 'run-b'")
            .await,
        1
    );
    // Deleting again, or deleting nothing, succeeds.
    assert_eq!(
        app.store_ok("agents", "delete", json!({"filter": {"agentIds": ["a"]}}))
            .await,
        None
    );
}

#[tokio::test]
async fn delete_by_cwd_only_touches_that_workspace() {
    let app = TestApp::spawn().await;
    app.store_ok("agents", "create", json!({"agent": agent("a", "/w1", 1)}))
        .await;
    app.store_ok("agents", "create", json!({"agent": agent("b", "/w2", 1)}))
        .await;
    app.store_ok("agents", "delete", json!({"filter": {"cwd": "/w1"}}))
        .await;
    assert!(app
        .store_ok("agents", "get", json!({"agentId": "a"}))
        .await
        .is_none());
    assert!(app
        .store_ok("agents", "get", json!({"agentId": "b"}))
        .await
        .is_some());
}

#[tokio::test]
async fn every_agents_method_works_over_the_proto_codec() {
    let app = TestApp::spawn().await;
    let doc = agent("p", "/ws", 1_780_000_000_000);
    assert_eq!(
        app.store_proto("agents", "create", json!({"agent": doc}))
            .await
            .unwrap(),
        Some(doc.clone())
    );
    assert_eq!(
        app.store_proto("agents", "get", json!({"agentId": "p"}))
            .await
            .unwrap(),
        Some(doc.clone())
    );
    assert_eq!(
        app.store_proto("agents", "get", json!({"agentId": "q"}))
            .await
            .unwrap(),
        None
    );
    let mut updated = doc.clone();
    updated["status"] = json!("archived");
    assert_eq!(
        app.store_proto("agents", "update", json!({"agent": updated}))
            .await
            .unwrap(),
        Some(updated.clone())
    );
    let list = app
        .store_proto(
            "agents",
            "list",
            json!({"filter": {"cwd": "/ws", "limit": 5}}),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(list["items"], json!([updated]));
    // Written over proto, read over JSON: the integer timestamp is still an integer.
    let resp = app
        .call_store("agents", "get", json!({"agentId": "p"}))
        .await;
    assert!(
        resp.text().contains(r#""updatedAt":1780000000000"#),
        "{}",
        resp.text()
    );
    assert_eq!(
        app.store_proto("agents", "delete", json!({"filter": {"agentIds": ["p"]}}))
            .await
            .unwrap(),
        None
    );
    let err = app
        .store_proto("agents", "update", json!({"agent": updated}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "not_found");
}
