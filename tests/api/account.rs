//! Issue 35: one account of each tool call in every view. An edited approval tells what ran
//! (`arguments`), what the model asked (`requested_arguments`), the tool's own JSON
//! (`result`, not the bridge's wrapper) and who decided, alike in the run state, the per-call
//! endpoint, the live stream and its replay; a call still held when its run ends has its end
//! (`cancelled`) in the replayed stream.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::TestApp;
use crate::run_api::append;
use crate::sse::durable;
use crate::waited::{completed, held_call, spawn_deploy};

const T: Duration = Duration::from_secs(10);

/// `deploy` answers the arguments it ran with (a command tool reads them on stdin).
async fn spawn() -> Arc<TestApp> {
    spawn_deploy(r#"["sh", "-c", "read a; echo \"{\\\"deployed\\\": $a}\""]"#).await
}

/// The fields every view gives of a call.
const ACCOUNT: [&str; 7] = [
    "arguments",
    "requested_arguments",
    "result",
    "outcome",
    "duration_ms",
    "waited_ms",
    "decision",
];

fn same_account(view: &Value, state: &Value) {
    for k in ACCOUNT {
        assert_eq!(view[k], state[k], "{k}: {view}");
    }
}

#[tokio::test]
async fn an_edited_approval_tells_what_ran_in_every_view() {
    let app = spawn().await;
    let live = {
        let app = app.clone();
        tokio::spawn(async move { app.stream("r1", Some(0)).await.collect(T).await })
    };
    // The model asks for 1.4.2 (the stored `running` event carries the model's arguments).
    let task = {
        append(
            &app,
            "r1",
            json!({"type": "tool_call", "call_id": "toolu_1", "name": "mcp", "status": "running",
            "args": {"providerIdentifier": "custom-user-tools", "toolName": "deploy", "args": {"version": "1.4.2"}}}),
        )
        .await;
        let app2 = app.clone();
        let body = json!({"toolName": "deploy", "args": {"version": "1.4.2"}, "toolCallId": "toolu_1", "agentId": "a1"});
        tokio::spawn(async move { app2.call_tool_as(&app2.tool_token, &body).await })
    };
    let id = loop {
        let list = app.api_get("/v1/approvals").await.json();
        if let Some(id) = list["approvals"][0]["id"].as_str() {
            break id.to_string();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let token = app.api_token.clone();
    let edited = json!({"version": "1.4.2-hotfix1"});
    let r = app
        .api(
            "POST",
            &format!("/v1/approvals/{id}"),
            Some(&token),
            &json!({"decision": "approve", "args": edited}).to_string(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let answer = tokio::time::timeout(T, task).await.unwrap().unwrap();
    // What the bridge stores: its MCP wrapper around the tool's JSON text.
    let text = answer["result"].to_string();
    append(
        &app,
        "r1",
        json!({"type": "tool_call", "call_id": "toolu_1", "name": "mcp", "status": "completed",
        "args": {"providerIdentifier": "custom-user-tools", "toolName": "deploy", "args": {"version": "1.4.2"}},
        "result": {"status": "success", "value": {"content": [{"text": {"text": text}}], "isError": false}}}),
    )
    .await;
    // A second held call: the run is cancelled while it waits.
    let held = held_call(&app, "toolu_2").await;
    append(&app, "r1", json!({"type": "status", "status": "CANCELLED"})).await;
    let _ = tokio::time::timeout(T, held).await;

    let ran = json!({"deployed": {"version": "1.4.2-hotfix1"}});
    let state = app.api_get("/v1/runs/r1").await.json();
    let call = &state["tool_calls"][0];
    assert_eq!(call["arguments"], edited, "{state}");
    assert_eq!(
        call["requested_arguments"],
        json!({"version": "1.4.2"}),
        "{state}"
    );
    assert_eq!(call["result"], ran, "{state}");
    assert_eq!(call["outcome"], "ok", "{state}");
    assert_eq!(call["decision"]["decision"], "approved", "{state}");
    assert_eq!(call["decision"]["edited"], true, "{state}");
    assert!(call["waited_ms"].as_i64().is_some(), "{state}");
    assert_eq!(state["tool_calls"][1]["outcome"], "cancelled", "{state}");

    let one = app.api_get("/v1/runs/r1/tool_calls/toolu_1").await.json();
    same_account(&one, call);
    assert_eq!(one["raw_result"]["value"]["isError"], false, "{one}");

    let live = tokio::time::timeout(T, live).await.unwrap().unwrap();
    let ev = completed(&live, "toolu_1");
    same_account(&ev, call);
    // The held call's end is in the stream, just before the run's.
    let end = completed(&live, "toolu_2");
    assert_eq!(end["outcome"], "cancelled", "{end}");
    let replay = app.stream("r1", Some(0)).await.collect(T).await;
    assert_eq!(durable(&replay), durable(&live), "replays are byte equal");
    assert_eq!(ends(&replay), ends(&live), "the calls' ends, byte equal");
    let data: Vec<Value> = replay.iter().filter_map(|f| f.data()).cloned().collect();
    let cancelled = data
        .iter()
        .position(|d| d["tool_call_id"] == "toolu_2" && d["type"] == "tool_completed");
    let ended = data.iter().position(|d| d["type"] == "completed");
    assert!(cancelled.is_some() && cancelled < ended, "{data:?}");
}

/// The raw `tool_completed` events, the id-less ones (closed by the run's end) included.
fn ends(frames: &[crate::sse::Frame]) -> Vec<String> {
    frames
        .iter()
        .filter_map(|f| match f {
            crate::sse::Frame::Event { raw, data, .. } if data["type"] == "tool_completed" => {
                Some(raw.clone())
            }
            _ => None,
        })
        .collect()
}
