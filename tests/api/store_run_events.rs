//! `runEvents.*`: per-run numbering, exclusive offsets, paging, idempotency, deletes.

use serde_json::{json, Value};

use crate::helpers::TestApp;

async fn append(app: &TestApp, run: &str, n: usize) {
    for i in 0..n {
        app.store_ok(
            "runEvents",
            "append",
            json!({"runId": run, "eventType": "run_stream_event", "payload": {"i": i}}),
        )
        .await;
    }
}

fn offsets(out: &Value) -> Vec<String> {
    out["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["offset"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn append_returns_the_event_document_numbered_per_run_from_one() {
    let app = TestApp::spawn().await;
    let payload = json!({"schemaVersion": 1, "type": "sdk_message", "message": {"type": "status", "status": "RUNNING"}});
    let ev = app
        .store_ok(
            "runEvents",
            "append",
            json!({"runId": "r1", "eventType": "run_stream_event", "payload": payload}),
        )
        .await
        .unwrap();
    assert_eq!(ev["runId"], "r1");
    assert_eq!(ev["seq"], 1);
    assert_eq!(ev["offset"], "1");
    assert_eq!(ev["eventType"], "run_stream_event");
    assert_eq!(ev["payload"], payload);
    assert_eq!(ev["payloadRef"], Value::Null);
    assert_eq!(ev["idempotencyKey"], Value::Null);
    assert!(ev["createdAt"].as_i64().unwrap() > 1_700_000_000_000);
    let other = app
        .store_ok(
            "runEvents",
            "append",
            json!({"runId": "r2", "eventType": "x"}),
        )
        .await
        .unwrap();
    assert_eq!(other["seq"], 1, "numbering is per run");
    assert_eq!(other["payload"], Value::Null, "absent payload is null");
    let second = app
        .store_ok(
            "runEvents",
            "append",
            json!({"runId": "r1", "eventType": "x", "payloadRef": "ref"}),
        )
        .await
        .unwrap();
    assert_eq!(
        (second["seq"].clone(), second["payloadRef"].clone()),
        (json!(2), json!("ref"))
    );
}

#[tokio::test]
async fn list_after_an_offset_is_exclusive_and_pages_with_next_offset() {
    let app = TestApp::spawn().await;
    append(&app, "r", 5).await;
    let out = app
        .store_ok(
            "runEvents",
            "list",
            json!({"runId": "r", "afterOffset": "2"}),
        )
        .await
        .unwrap();
    assert_eq!(offsets(&out), ["3", "4", "5"]);
    assert!(out.get("nextOffset").is_none());

    let page1 = app
        .store_ok("runEvents", "list", json!({"runId": "r", "limit": 2}))
        .await
        .unwrap();
    assert_eq!(
        (offsets(&page1), page1["nextOffset"].clone()),
        (vec!["1".into(), "2".into()], json!("2"))
    );
    let page3 = app
        .store_ok(
            "runEvents",
            "list",
            json!({"runId": "r", "limit": 2, "afterOffset": "4"}),
        )
        .await
        .unwrap();
    assert_eq!(offsets(&page3), ["5"]);
    assert!(page3.get("nextOffset").is_none());
    let past = app
        .store_ok(
            "runEvents",
            "list",
            json!({"runId": "r", "afterOffset": "5"}),
        )
        .await
        .unwrap();
    assert_eq!(
        past,
        json!({"items": []}),
        "an empty page never carries nextOffset"
    );
    let empty = app
        .store_ok(
            "runEvents",
            "list",
            json!({"runId": "r", "afterOffset": ""}),
        )
        .await
        .unwrap();
    assert_eq!(offsets(&empty).len(), 5, "\"\" means from the start");
}

#[tokio::test]
async fn list_defaults_to_one_hundred_events() {
    let app = TestApp::spawn().await;
    append(&app, "r", 105).await;
    let out = app
        .store_ok("runEvents", "list", json!({"runId": "r"}))
        .await
        .unwrap();
    assert_eq!(out["items"].as_array().unwrap().len(), 100);
    assert_eq!(out["nextOffset"], "100");
    let rest = app
        .store_ok(
            "runEvents",
            "list",
            json!({"runId": "r", "afterOffset": "100"}),
        )
        .await
        .unwrap();
    assert_eq!(offsets(&rest), ["101", "102", "103", "104", "105"]);
}

#[tokio::test]
async fn an_append_with_a_known_idempotency_key_returns_the_first_event_unchanged() {
    let app = TestApp::spawn().await;
    let first = app
        .store_ok(
            "runEvents",
            "append",
            json!({"runId": "r", "eventType": "a", "payload": 1, "idempotencyKey": "k"}),
        )
        .await
        .unwrap();
    let again = app
        .store_ok(
            "runEvents",
            "append",
            json!({"runId": "r", "eventType": "b", "payload": 2, "idempotencyKey": "k"}),
        )
        .await
        .unwrap();
    assert_eq!(first, again);
    assert_eq!(app.count("SELECT count(*) FROM run_events").await, 1);
    // The same key in another run, or an empty key, is a new event.
    let other = app
        .store_ok(
            "runEvents",
            "append",
            json!({"runId": "r2", "eventType": "a", "idempotencyKey": "k"}),
        )
        .await
        .unwrap();
    assert_eq!(other["seq"], 1);
    for _ in 0..2 {
        app.store_ok(
            "runEvents",
            "append",
            json!({"runId": "r", "eventType": "a", "idempotencyKey": ""}),
        )
        .await;
    }
    assert_eq!(
        app.count("SELECT count(*) FROM run_events WHERE run_id = 'r'")
            .await,
        3
    );
}

#[tokio::test]
async fn delete_is_per_run_idempotent_and_an_empty_filter_deletes_all() {
    let app = TestApp::spawn().await;
    append(&app, "r1", 2).await;
    append(&app, "r2", 2).await;
    append(&app, "r3", 1).await;
    for _ in 0..2 {
        // DeleteAgent deletes each run's events twice.
        assert_eq!(
            app.store_ok("runEvents", "delete", json!({"filter": {"runIds": ["r1"]}}))
                .await,
            None
        );
    }
    assert_eq!(app.count("SELECT count(*) FROM run_events").await, 3);
    app.store_ok("runEvents", "delete", json!({"filter": {}}))
        .await;
    assert_eq!(app.count("SELECT count(*) FROM run_events").await, 0);
}

#[tokio::test]
async fn run_events_work_over_the_proto_codec() {
    let app = TestApp::spawn().await;
    let ev = app
        .store_proto(
            "runEvents",
            "append",
            json!({"runId": "r", "eventType": "e", "payload": {"n": 3}}),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            ev["seq"].clone(),
            ev["offset"].clone(),
            ev["payload"].clone()
        ),
        (json!(1), json!("1"), json!({"n": 3}))
    );
    let list = app
        .store_proto(
            "runEvents",
            "list",
            json!({"runId": "r", "afterOffset": "0"}),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    assert_eq!(
        app.store_proto("runEvents", "delete", json!({"filter": {"runIds": ["r"]}}))
            .await
            .unwrap(),
        None
    );
    assert_eq!(app.count("SELECT count(*) FROM run_events").await, 0);
}
