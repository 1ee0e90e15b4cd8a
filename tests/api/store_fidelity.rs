//! Documents come back byte for byte as the JSON client sent them: unknown and nested keys,
//! nulls, unicode, escapes and number spellings. `sdkMetadata` carries the agent's blob
//! encryption key, so losing a field breaks the agent.

use serde_json::json;

use crate::helpers::{Framing, TestApp};

const DOC: &str = r#"{"agentId":"agent-ü","cwd":"/ws/with space/ünï","status":"idle","activeRunId":null,"name":"Tab\tand \"quotes\" \u2028 \ud83d\ude00","createdAt":1780000000000,"updatedAt":1780000000001,"latestCheckpoint":null,"sdkMetadata":{"blobEncryptionKey":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","hostTag":{"deep":[1,2.5,-0.0,1e21,12345678901234567890,{"x":null}]}},"hostExtra":[],"zeta":{},"alpha":true}"#;

#[tokio::test]
async fn an_agent_document_comes_back_byte_for_byte() {
    let app = TestApp::spawn().await;
    let create = format!(r#"{{"substore":"agents","method":"create","input":{{"agent":{DOC}}}}}"#);
    let resp = app.store_raw(create, Framing::Chunked).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.text(), format!(r#"{{"output":{DOC}}}"#));
    let get = r#"{"substore":"agents","method":"get","input":{"agentId":"agent-ü"}}"#;
    let resp = app.store_raw(get, Framing::ContentLength).await;
    assert_eq!(resp.text(), format!(r#"{{"output":{DOC}}}"#));
    let list =
        r#"{"substore":"agents","method":"list","input":{"filter":{"cwd":"/ws/with space/ünï"}}}"#;
    let resp = app.store_raw(list, Framing::Chunked).await;
    assert_eq!(resp.text(), format!(r#"{{"output":{{"items":[{DOC}]}}}}"#));
}

#[tokio::test]
async fn run_documents_and_event_payloads_come_back_byte_for_byte() {
    let app = TestApp::spawn().await;
    let run = r#"{"runId":"run-1","agentId":"a","turnNumber":1,"usage":{"inputTokens":20,"outputTokens":12},"model":{"id":"composer-2","params":[{"id":"thinking","value":"high"}]},"endedAt":null,"x":1.50}"#;
    let resp = app
        .store_raw(
            format!(r#"{{"substore":"runs","method":"create","input":{{"run":{run}}}}}"#),
            Framing::Chunked,
        )
        .await;
    assert_eq!(resp.text(), format!(r#"{{"output":{run}}}"#));
    let payload = r#"{"schemaVersion":1,"type":"sdk_message","message":{"type":"assistant","text":"ünï \"q\"","n":1.0}}"#;
    let resp = app
        .store_raw(
            format!(r#"{{"substore":"runEvents","method":"append","input":{{"runId":"run-1","eventType":"run_stream_event","payload":{payload}}}}}"#),
            Framing::Chunked,
        )
        .await;
    assert!(
        resp.text().contains(&format!(r#""payload":{payload}"#)),
        "{}",
        resp.text()
    );
    let resp = app
        .call_store("runEvents", "list", json!({"runId": "run-1"}))
        .await;
    assert!(
        resp.text().contains(&format!(r#""payload":{payload}"#)),
        "{}",
        resp.text()
    );
}

#[tokio::test]
async fn documents_survive_a_restart() {
    let app = TestApp::spawn().await;
    let create = format!(r#"{{"substore":"agents","method":"create","input":{{"agent":{DOC}}}}}"#);
    assert_eq!(app.store_raw(create, Framing::Chunked).await.status, 200);
    let dir = app.stop().await;
    let app = TestApp::spawn_in(dir, |_| {}).await;
    let get = r#"{"substore":"agents","method":"get","input":{"agentId":"agent-ü"}}"#;
    assert_eq!(
        app.store_raw(get, Framing::Chunked).await.text(),
        format!(r#"{{"output":{DOC}}}"#)
    );
}
