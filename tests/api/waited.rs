//! Issue 21: a tool call held for approval reports the wait for the person as `waited_ms`,
//! apart from its execution time (`duration_ms`), in the run's state and in its stream (live
//! and replayed alike). A denied call waited until its denial, and never ran.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::TestApp;
use crate::run_api::append;
use crate::sse::durable;

const T: Duration = Duration::from_secs(10);
const HELD_MS: u64 = 1500;

/// The daemon with a `deploy` tool held for approval; each time it runs it appends a line
/// to the returned marker file, so "never ran" is observed, not assumed.
async fn spawn(dir: &Path) -> (Arc<TestApp>, PathBuf) {
    let marker = dir.join("deploys");
    let argv =
        format!(r#"["sh", "-c", "echo ran >> \"$0\"; echo '{{\"deployed\": true}}'", {marker:?}]"#);
    (spawn_deploy(&argv).await, marker)
}

/// A daemon whose `deploy` tool (`argv`, a TOML array) is held for approval on every call,
/// with run r1 running.
pub(crate) async fn spawn_deploy(argv: &str) -> Arc<TestApp> {
    let tool: callbackd::config::CommandToolConfig = toml::from_str(&format!(
        r#"
name = "deploy"
description = "Deploys"
argv = {argv}
input_schema = {{ type = "object" }}
approval = "always"
"#
    ))
    .unwrap();
    let app = TestApp::spawn_with(move |c| c.tools.command.push(tool)).await;
    app.running_run_r1().await;
    Arc::new(app)
}

/// How many times the tool ran.
fn runs(marker: &Path) -> usize {
    std::fs::read_to_string(marker).map_or(0, |s| s.lines().count())
}

/// The bridge's held call: its stored `running` event, then the call (waiting for a person).
pub(crate) async fn held_call(app: &Arc<TestApp>, call_id: &str) -> tokio::task::JoinHandle<()> {
    append(
        app,
        "r1",
        json!({"type": "tool_call", "call_id": call_id, "name": "mcp", "status": "running",
        "args": {"providerIdentifier": "custom-user-tools", "toolName": "deploy", "args": {}}}),
    )
    .await;
    let app2 = app.clone();
    let body = json!({"toolName": "deploy", "args": {}, "toolCallId": call_id, "agentId": "a1"});
    let task = tokio::spawn(async move {
        app2.call_tool_as(&app2.tool_token, &body).await;
    });
    for _ in 0..200 {
        let list = app.api_get("/v1/approvals").await.json();
        if list["approvals"].as_array().is_some_and(|a| !a.is_empty()) {
            return task;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no pending approval appeared");
}

pub(crate) async fn decide(app: &TestApp, decision: &str) {
    let id = app.api_get("/v1/approvals").await.json()["approvals"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let token = app.api_token.clone();
    let r = app
        .api(
            "POST",
            &format!("/v1/approvals/{id}"),
            Some(&token),
            &json!({"decision": decision}).to_string(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

/// The `tool_completed` event of `call_id` among `frames` (the account tests read it too).
pub(crate) fn completed(frames: &[crate::sse::Frame], call_id: &str) -> Value {
    frames
        .iter()
        .filter_map(|f| f.data())
        .find(|d| d["type"] == "tool_completed" && d["tool_call_id"] == call_id)
        .cloned()
        .unwrap_or_else(|| panic!("no tool_completed of {call_id} in {frames:?}"))
}

#[tokio::test]
async fn a_held_call_reports_its_wait_apart_from_its_execution() {
    let dir = tempfile::tempdir().unwrap();
    let (app, marker) = spawn(dir.path()).await;
    // The live read, open before any of the events it is to see.
    let mut live = app.stream("r1", None).await;
    assert_eq!(live.next(T).await.unwrap().kind(), "up_to_date");

    let asked = Instant::now();
    let task = held_call(&app, "toolu_1").await;
    tokio::time::sleep(Duration::from_millis(HELD_MS)).await;
    decide(&app, "approve").await;
    let approved_within = asked.elapsed().as_millis() as i64;
    tokio::time::timeout(T, task).await.unwrap().unwrap();
    assert_eq!(runs(&marker), 1, "the approved call ran once");
    append(
        &app,
        "r1",
        json!({"type": "tool_call", "call_id": "toolu_1", "name": "mcp", "status": "completed",
        "args": {"providerIdentifier": "custom-user-tools", "toolName": "deploy", "args": {}},
        "result": {"status": "success", "value": {"deployed": true}}}),
    )
    .await;

    // Denied: it waited until the denial and never ran.
    let asked = Instant::now();
    let task = held_call(&app, "toolu_2").await;
    tokio::time::sleep(Duration::from_millis(HELD_MS / 2)).await;
    decide(&app, "deny").await;
    let denied_within = asked.elapsed().as_millis() as i64;
    tokio::time::timeout(T, task).await.unwrap().unwrap();
    assert_eq!(runs(&marker), 1, "the denied call never ran");
    append(
        &app,
        "r1",
        json!({"type": "tool_call", "call_id": "toolu_2", "name": "mcp", "status": "completed",
        "args": {"providerIdentifier": "custom-user-tools", "toolName": "deploy", "args": {}},
        "result": {"status": "error", "error": "denied"}}),
    )
    .await;
    append(&app, "r1", json!({"type": "status", "status": "FINISHED"})).await;

    let state = app.api_get("/v1/runs/r1").await.json();
    let calls = state["tool_calls"].as_array().unwrap();
    let (approved, denied) = (&calls[0], &calls[1]);
    let waited = approved["waited_ms"]
        .as_i64()
        .unwrap_or_else(|| panic!("{approved}"));
    // From the request to the decision: at least the hold, at most what the test saw pass.
    assert!(
        (HELD_MS as i64..=approved_within).contains(&waited),
        "waited {waited} ms, held {HELD_MS}..{approved_within}: {approved}"
    );
    let ran = approved["duration_ms"].as_i64().unwrap();
    assert!(ran < waited, "the wait is not execution time: {approved}");
    assert_eq!(approved["outcome"], "ok");
    assert_eq!(denied["outcome"], "denied");
    let denied_waited = denied["waited_ms"]
        .as_i64()
        .unwrap_or_else(|| panic!("{denied}"));
    assert!(
        (HELD_MS as i64 / 2..=denied_within).contains(&denied_waited),
        "waited until the denial, {}..{denied_within} ms: {denied}",
        HELD_MS / 2
    );
    // It never ran: no execution time (its whole time was the wait, issue 35).
    assert!(denied["duration_ms"].is_null(), "{denied}");

    let live = live.collect(T).await;
    let ev = completed(&live, "toolu_1");
    assert_eq!(ev["waited_ms"], waited, "{ev}");
    assert_eq!(ev["duration_ms"], ran, "{ev}");
    assert_eq!(completed(&live, "toolu_2")["waited_ms"], denied_waited);
    let replay = app.stream("r1", Some(0)).await.collect(T).await;
    assert_eq!(durable(&replay), durable(&live), "replays are byte equal");
}
