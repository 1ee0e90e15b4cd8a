//! `checkpoints.*`: base64 blobs stored as bytes, existence rules, paging, checksums.

use serde_json::{json, Value};

use crate::helpers::TestApp;

/// Standard padded base64 of `bytes` (what the bridge sends).
fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[tokio::test]
async fn a_blob_round_trips_as_bytes() {
    let app = TestApp::spawn().await;
    let bytes: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    let miss = app
        .store_ok(
            "checkpoints",
            "get",
            json!({"agentId": "a", "blobId": "b1"}),
        )
        .await;
    assert_eq!(miss, Some(json!({"found": false})));
    let created = app
        .store_ok(
            "checkpoints",
            "create",
            json!({"agentId": "a", "blobId": "b1", "data": b64(&bytes)}),
        )
        .await;
    assert_eq!(created, None, "create answers an unset output");
    let got = app
        .store_ok(
            "checkpoints",
            "get",
            json!({"agentId": "a", "blobId": "b1"}),
        )
        .await
        .unwrap();
    assert_eq!(got, json!({"found": true, "data": b64(&bytes)}));
    assert_eq!(
        app.count("SELECT length(data) FROM checkpoints").await,
        70_000,
        "stored decoded"
    );
    // Blobs belong to an agent.
    let other = app
        .store_ok(
            "checkpoints",
            "get",
            json!({"agentId": "z", "blobId": "b1"}),
        )
        .await;
    assert_eq!(other, Some(json!({"found": false})));
}

#[tokio::test]
async fn create_of_an_existing_blob_and_update_of_a_missing_one_are_errors() {
    let app = TestApp::spawn().await;
    app.store_ok(
        "checkpoints",
        "create",
        json!({"agentId": "a", "blobId": "b", "data": "AQID"}),
    )
    .await;
    let (code, msg) = app
        .store_err(
            "checkpoints",
            "create",
            json!({"agentId": "a", "blobId": "b", "data": "BAUG"}),
        )
        .await;
    assert_eq!(code, "already_exists");
    assert!(
        msg.contains("checkpoint blob b already exists for agent a"),
        "{msg}"
    );
    let (code, msg) = app
        .store_err(
            "checkpoints",
            "update",
            json!({"agentId": "a", "blobId": "c", "data": "AQID"}),
        )
        .await;
    assert_eq!(code, "not_found");
    assert!(
        msg.contains("checkpoint blob c not found for agent a"),
        "{msg}"
    );
    assert_eq!(
        app.store_ok(
            "checkpoints",
            "update",
            json!({"agentId": "a", "blobId": "b", "data": "BAUG"})
        )
        .await,
        None
    );
    let got = app
        .store_ok("checkpoints", "get", json!({"agentId": "a", "blobId": "b"}))
        .await
        .unwrap();
    assert_eq!(got["data"], "BAUG");
}

#[tokio::test]
async fn list_is_ascending_with_the_raw_last_id_as_cursor() {
    let app = TestApp::spawn().await;
    for id in ["cc", "aa", "dd", "bb", "ee"] {
        app.store_ok(
            "checkpoints",
            "create",
            json!({"agentId": "a", "blobId": id, "data": "AA=="}),
        )
        .await;
    }
    app.store_ok(
        "checkpoints",
        "create",
        json!({"agentId": "other", "blobId": "ab", "data": "AA=="}),
    )
    .await;
    let page1 = app
        .store_ok(
            "checkpoints",
            "list",
            json!({"filter": {"agentIds": ["a"], "limit": 2}}),
        )
        .await
        .unwrap();
    assert_eq!(page1, json!({"items": ["aa", "bb"], "nextCursor": "bb"}));
    let page3 = app
        .store_ok(
            "checkpoints",
            "list",
            json!({"filter": {"agentIds": ["a"], "limit": 2, "cursor": "dd"}}),
        )
        .await
        .unwrap();
    assert_eq!(page3, json!({"items": ["ee"]}));
    let all = app
        .store_ok(
            "checkpoints",
            "list",
            json!({"filter": {"agentIds": ["a"]}}),
        )
        .await
        .unwrap();
    assert_eq!(all, json!({"items": ["aa", "bb", "cc", "dd", "ee"]}));
    let by_id = app
        .store_ok(
            "checkpoints",
            "list",
            json!({"filter": {"blobIds": ["ab", "cc"]}}),
        )
        .await
        .unwrap();
    assert_eq!(by_id, json!({"items": ["ab", "cc"]}));
}

#[tokio::test]
async fn delete_is_idempotent_and_filtered() {
    let app = TestApp::spawn().await;
    for (agent, id) in [("a", "x"), ("a", "y"), ("b", "x")] {
        app.store_ok(
            "checkpoints",
            "create",
            json!({"agentId": agent, "blobId": id, "data": "AA=="}),
        )
        .await;
    }
    for _ in 0..2 {
        assert_eq!(
            app.store_ok(
                "checkpoints",
                "delete",
                json!({"filter": {"agentIds": ["a"], "blobIds": ["x"]}})
            )
            .await,
            None
        );
    }
    let left: Value = app
        .store_ok("checkpoints", "list", json!({}))
        .await
        .unwrap();
    assert_eq!(left, json!({"items": ["x", "y"]}));
    assert_eq!(app.count("SELECT count(*) FROM checkpoints").await, 2);
}

#[tokio::test]
async fn a_corrupted_blob_is_data_loss_not_wrong_bytes() {
    let app = TestApp::spawn().await;
    app.store_ok(
        "checkpoints",
        "create",
        json!({"agentId": "a", "blobId": "root", "data": b64(b"conversation state")}),
    )
    .await;
    app.exec(
        "UPDATE checkpoints SET data = CAST('conversation statE' AS BLOB)",
        "UPDATE checkpoints SET data = convert_to('conversation statE', 'UTF8')",
    )
    .await;
    let resp = app
        .call_store(
            "checkpoints",
            "get",
            json!({"agentId": "a", "blobId": "root"}),
        )
        .await;
    assert_eq!(resp.code(), "data_loss");
    assert!(resp.message().contains("root"), "{}", resp.message());
}

#[tokio::test]
async fn checkpoints_work_over_the_proto_codec() {
    let app = TestApp::spawn().await;
    let data = b64(&[9u8; 100]);
    assert_eq!(
        app.store_proto(
            "checkpoints",
            "create",
            json!({"agentId": "a", "blobId": "b", "data": data})
        )
        .await
        .unwrap(),
        None
    );
    assert_eq!(
        app.store_proto(
            "checkpoints",
            "update",
            json!({"agentId": "a", "blobId": "b", "data": data})
        )
        .await
        .unwrap(),
        None
    );
    let got = app
        .store_proto("checkpoints", "get", json!({"agentId": "a", "blobId": "b"}))
        .await
        .unwrap();
    assert_eq!(got, Some(json!({"found": true, "data": data})));
    let list = app
        .store_proto(
            "checkpoints",
            "list",
            json!({"filter": {"agentIds": ["a"]}}),
        )
        .await
        .unwrap();
    assert_eq!(list, Some(json!({"items": ["b"]})));
    assert_eq!(
        app.store_proto(
            "checkpoints",
            "delete",
            json!({"filter": {"agentIds": ["a"]}})
        )
        .await
        .unwrap(),
        None
    );
    assert_eq!(app.count("SELECT count(*) FROM checkpoints").await, 0);
}
