//! Human approval of tool calls (issue 15) against the real server: the bridge's tool call
//! is a CallCustomTool that waits; the person is the run API.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{agent, run, TestApp, TOOL_PATH};
use crate::sse::Frame;

const T: Duration = Duration::from_secs(10);

/// The deploy tool's side effect: each run of it appends a line to a file, so a test can
/// tell "never ran" from "ran, then reported denied".
struct Marker {
    dir: tempfile::TempDir,
}

impl Marker {
    fn new() -> Marker {
        Marker {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self) -> std::path::PathBuf {
        self.dir.path().join("runs")
    }

    /// How many times the tool ran.
    fn runs(&self) -> usize {
        std::fs::read_to_string(self.path()).map_or(0, |s| s.lines().count())
    }
}

fn deploy_tool(marker: &Marker, extra: &str) -> callbackd::config::CommandToolConfig {
    let path = marker.path();
    toml::from_str(&format!(
        r#"
name = "deploy"
description = "Deploys"
argv = ["sh", "-c", "echo ran >> '{}'; echo '{{\"deployed\": true}}'"]
input_schema = {{ type = "object", properties = {{ env = {{ type = "string" }} }} }}
{extra}
"#,
        path.display()
    ))
    .unwrap()
}

async fn spawn(extra: &str) -> (Arc<TestApp>, Marker) {
    let marker = Marker::new();
    let tool = deploy_tool(&marker, extra);
    let app = TestApp::spawn_with(move |c| c.tools.command.push(tool)).await;
    app.running_run_r1().await;
    (Arc::new(app), marker)
}

/// The bridge's tool call, in a task of its own (it waits for the decision).
fn call(app: &Arc<TestApp>, env: &str, call_id: &str) -> tokio::task::JoinHandle<Value> {
    call_as(app, &app.tool_token, "a1", env, call_id)
}

/// [`call`] with another namespace's tool token, for its agent.
fn call_as(
    app: &Arc<TestApp>,
    tool_token: &str,
    agent_id: &str,
    env: &str,
    call_id: &str,
) -> tokio::task::JoinHandle<Value> {
    let app = app.clone();
    let body = json!({"toolName": "deploy", "args": {"env": env}, "toolCallId": call_id, "agentId": agent_id});
    let tool_token = tool_token.to_string();
    tokio::spawn(async move { app.call_tool_as(&tool_token, &body).await })
}

/// The daemon's `/metrics` text (no metrics token is configured here).
async fn scrape(app: &TestApp) -> String {
    app.request(
        "GET",
        "/metrics",
        &[],
        "",
        crate::helpers::Framing::ContentLength,
    )
    .await
    .text()
}

async fn pending(app: &TestApp) -> Vec<Value> {
    pending_as(app, &app.api_token).await
}

/// The pending approvals `api_token`'s namespace sees, once there is one.
async fn pending_as(app: &TestApp, api_token: &str) -> Vec<Value> {
    for _ in 0..200 {
        let list = app
            .api("GET", "/v1/approvals", Some(api_token), "")
            .await
            .json();
        let items = list["approvals"].as_array().cloned().unwrap_or_default();
        if !items.is_empty() {
            return items;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no pending approval appeared");
}

async fn decide(app: &TestApp, id: &str, body: &str) -> crate::helpers::Resp {
    let token = app.api_token.clone();
    app.api("POST", &format!("/v1/approvals/{id}"), Some(&token), body)
        .await
}

#[tokio::test]
async fn an_approved_call_runs_and_the_stream_shows_the_card_and_the_decision() {
    let (app, marker) = spawn(r#"approval = "always""#).await;
    let mut s = app.stream("r1", None).await;
    assert_eq!(s.next(T).await.unwrap().kind(), "up_to_date");
    let task = call(&app, "prod", "toolu_1");
    let required = s.next(T).await.unwrap();
    assert_eq!(required.kind(), "approval_required", "{required:?}");
    assert!(
        matches!(required, Frame::Event { id: None, .. }),
        "not a numbered event"
    );
    let card = required.data().unwrap()["approval"].clone();
    assert_eq!(card["tool"], "deploy");
    assert_eq!(card["tool_call_id"], "toolu_1");
    assert_eq!(card["args"], json!({"env": "prod"}));
    assert!(card["expires_at"].as_str().unwrap().ends_with('Z'));
    // A stream opened after the approval was raised still shows it.
    let mut late = app.stream("r1", None).await;
    assert_eq!(late.next(T).await.unwrap().kind(), "approval_required");
    let listed = pending(&app).await;
    assert_eq!(listed[0]["id"], card["id"]);
    assert!(
        !task.is_finished(),
        "the call answered before it was approved"
    );
    assert_eq!(marker.runs(), 0, "the tool ran before it was approved");
    const PENDING: &str = r#"callbackd_approvals_pending{namespace="default"} "#;
    assert!(
        scrape(&app).await.contains(&format!("{PENDING}1")),
        "/metrics counts the held call"
    );
    let id = card["id"].as_str().unwrap().to_string();
    let r = decide(
        &app,
        &id,
        r#"{"decision": "approve", "reason": "looks fine"}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["state"], "approved");
    assert_eq!(r.json()["decided_by"], "default/api");
    let result = tokio::time::timeout(T, task).await.unwrap().unwrap();
    assert_eq!(result["deployed"], true, "{result}");
    assert_eq!(marker.runs(), 1, "the approved call ran its tool once");
    assert!(
        scrape(&app).await.contains(&format!("{PENDING}0")),
        "/metrics: nothing held once decided"
    );
    let resolved = s.next(T).await.unwrap();
    assert_eq!(resolved.kind(), "approval_resolved");
    assert_eq!(resolved.data().unwrap()["decision"], "approved");
    assert_eq!(resolved.data().unwrap()["approval_id"], id.as_str());
    // Decided: a second decision is 409 and says what happened.
    let again = decide(&app, &id, r#"{"decision": "deny"}"#).await;
    assert_eq!(again.status, 409);
    assert!(again.json()["detail"]
        .as_str()
        .unwrap()
        .contains("approved by default/api"));
    assert!(app.api_get("/v1/approvals").await.json()["approvals"]
        .as_array()
        .unwrap()
        .is_empty());
    let all = app.api_get("/v1/approvals?state=all").await.json();
    assert_eq!(all["approvals"][0]["reason"], "looks fine");
    let state = app.api_get("/v1/runs/r1").await.json();
    assert_eq!(state["tool_calls"][0]["outcome"], "ok");
}

#[tokio::test]
async fn a_denial_and_a_timeout_give_the_model_an_error_and_never_run_the_tool() {
    let (app, marker) = spawn("approval = \"always\"\napproval_timeout_ms = 400").await;
    let task = call(&app, "prod", "toolu_1");
    let id = pending(&app).await[0]["id"].as_str().unwrap().to_string();
    let r = decide(
        &app,
        &id,
        r#"{"decision": "deny", "reason": "not on a Friday"}"#,
    )
    .await;
    assert_eq!(r.status, 200);
    let result = tokio::time::timeout(T, task).await.unwrap().unwrap();
    assert_eq!(result["isError"], true, "{result}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("denied") && text.contains("default/api") && text.contains("not on a Friday"),
        "{text}"
    );
    // No decision within approval_timeout_ms: denied.
    let task = call(&app, "prod", "toolu_2");
    let result = tokio::time::timeout(T, task).await.unwrap().unwrap();
    let text = result["content"][0]["text"].as_str().unwrap().to_string();
    assert!(text.contains("nobody approved"), "{text}");
    let all = app.api_get("/v1/approvals?state=all").await.json();
    let states: Vec<&str> = all["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["denied", "expired"]);
    let expired = all["approvals"][1]["id"].as_str().unwrap().to_string();
    assert_eq!(
        decide(&app, &expired, r#"{"decision": "approve"}"#)
            .await
            .status,
        409
    );
    let calls = app.api_get("/v1/runs/r1").await.json()["tool_calls"].clone();
    assert_eq!(calls[0]["outcome"], "denied");
    // Nobody decided in time: its own outcome (issue 35), not a person's denial.
    assert_eq!(calls[1]["outcome"], "expired");
    assert_eq!(marker.runs(), 0, "a denied or expired call ran its tool");
}

#[tokio::test]
async fn a_rule_lets_dev_through_and_holds_prod() {
    let (app, marker) = spawn(r#"approval = { pointer = "/env", values = ["prod"] }"#).await;
    let dev = tokio::time::timeout(T, call(&app, "dev", "toolu_1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(dev["deployed"], true);
    assert_eq!(marker.runs(), 1, "the dev call ran its tool");
    let prod = call(&app, "prod", "toolu_2");
    let held = pending(&app).await;
    assert_eq!(held.len(), 1);
    assert_eq!(held[0]["args"]["env"], "prod");
    assert!(!prod.is_finished());
    assert_eq!(marker.runs(), 1, "the held prod call ran its tool");
    prod.abort();
}

#[tokio::test]
async fn a_dropped_bridge_call_cancels_its_approval() {
    let (app, marker) = spawn(r#"approval = "always""#).await;
    let mut s = app.stream("r1", None).await;
    assert_eq!(s.next(T).await.unwrap().kind(), "up_to_date");
    let task = call(&app, "prod", "toolu_1");
    assert_eq!(s.next(T).await.unwrap().kind(), "approval_required");
    task.abort(); // the bridge hangs up
    let resolved = s.next(T).await.unwrap();
    assert_eq!(resolved.kind(), "approval_resolved");
    assert_eq!(resolved.data().unwrap()["decision"], "cancelled");
    let all = app.api_get("/v1/approvals?state=all").await.json();
    assert_eq!(all["approvals"][0]["state"], "cancelled");
    assert_eq!(marker.runs(), 0, "a cancelled call ran its tool");
}

/// Namespace b's four tokens, made up by the test.
const B_STORE: &str = "b-store-token-0123456789abcdef";
const B_TOOL: &str = "b-tool-token-0123456789abcdef";
const B_API: &str = "b-api-token-0123456789abcdef";
const B_READ: &str = "b-read-token-0123456789abcdef";

#[tokio::test]
async fn bad_decisions_and_other_namespaces_get_problems() {
    let marker = Marker::new();
    let tool = deploy_tool(&marker, r#"approval = "always""#);
    let mut app = TestApp::spawn_with(move |c| {
        c.tools.command.push(tool);
        let secret = |s: &str| Some(callbackd::secret::Secret::new(s.to_string()));
        c.namespaces.push(callbackd::namespaces::NamespaceConfig {
            name: "b".into(),
            store_token: secret(B_STORE),
            tool_token: secret(B_TOOL),
            api_token: secret(B_API),
            api_read_token: secret(B_READ),
            ..Default::default()
        });
    })
    .await;
    // Each namespace has a running run with a call of its own waiting for approval.
    let a_store = std::mem::replace(&mut app.store_token, B_STORE.to_string());
    for (store, agent_id, run_id) in [(B_STORE, "b1", "rb1"), (a_store.as_str(), "a1", "r1")] {
        app.store_token = store.to_string();
        let mut a = agent(agent_id, "/ws", 1_780_000_000_000);
        a["activeRunId"] = json!(run_id);
        app.store_ok("agents", "create", json!({"agent": a})).await;
        let mut r = run(agent_id, run_id, 1);
        r["status"] = json!("running");
        app.store_ok("runs", "create", json!({"run": r})).await;
    }
    let app = Arc::new(app);
    let task = call(&app, "prod", "toolu_1");
    let id = pending(&app).await[0]["id"].as_str().unwrap().to_string();
    let b_task = call_as(&app, B_TOOL, "b1", "staging", "toolu_b1");
    let b_listed = pending_as(&app, B_API).await;
    assert_eq!(
        b_listed.len(),
        1,
        "b sees its own approval only: {b_listed:?}"
    );
    assert_eq!(b_listed[0]["args"]["env"], "staging");
    let b_id = b_listed[0]["id"].as_str().unwrap().to_string();
    assert_ne!(b_id, id);
    let a_listed = pending(&app).await;
    assert_eq!(
        a_listed.len(),
        1,
        "a sees its own approval only: {a_listed:?}"
    );
    assert_eq!(a_listed[0]["id"], id.as_str());
    let token = app.api_token.clone();
    let read = app.api_read_token.clone();
    for (body, status, code) in [
        (r#"{"decision": "maybe"}"#, 400, "invalid_argument"),
        (
            r#"{"decision": "approve", "extra": 1}"#,
            400,
            "invalid_argument",
        ),
        ("not json", 400, "invalid_argument"),
        (r#"{}"#, 400, "invalid_argument"),
    ] {
        let r = app
            .api("POST", &format!("/v1/approvals/{id}"), Some(&token), body)
            .await;
        assert_eq!(r.status, status, "{body}: {}", r.text());
        assert_eq!(r.json()["code"], code);
    }
    // Another namespace's approval is answered as one that exists nowhere, both ways.
    let ghost = format!("appr_{}", "0".repeat(b_id.len() - 5));
    let decide_as = |token: &str, id: &str| {
        let (app, token, id) = (app.clone(), token.to_string(), id.to_string());
        async move {
            let r = app
                .api(
                    "POST",
                    &format!("/v1/approvals/{id}"),
                    Some(&token),
                    r#"{"decision": "approve"}"#,
                )
                .await;
            (r.status, r.text().replace(&id, "<ID>"))
        }
    };
    let nowhere = decide_as(&token, &ghost).await;
    assert_eq!(nowhere.0, 404, "{nowhere:?}");
    assert_eq!(
        decide_as(&token, &b_id).await,
        nowhere,
        "a decides b's approval"
    );
    assert_eq!(
        decide_as(B_API, &id).await,
        nowhere,
        "b decides a's approval"
    );
    let r = app
        .api(
            "POST",
            &format!("/v1/approvals/{id}"),
            Some(&read),
            r#"{"decision": "approve"}"#,
        )
        .await;
    assert_eq!(r.status, 403);
    let r = app
        .api("GET", "/v1/approvals?state=bogus", Some(&token), "")
        .await;
    assert_eq!(r.status, 400);
    // Nothing above decided either call, and neither ran its tool.
    assert_eq!(pending(&app).await.len(), 1, "nothing above decided a's");
    let b_still = pending_as(&app, B_API).await;
    assert_eq!(b_still.len(), 1, "nothing above decided b's");
    assert_eq!(b_still[0]["id"], b_id.as_str());
    assert!(!task.is_finished() && !b_task.is_finished());
    assert_eq!(marker.runs(), 0);
    // b's own token decides b's: the id was real, and only b's call runs.
    let r = decide_as(B_API, &b_id).await;
    assert_eq!(r.0, 200, "{r:?}");
    let result = tokio::time::timeout(T, b_task).await.unwrap().unwrap();
    assert_eq!(result["deployed"], true, "{result}");
    assert_eq!(marker.runs(), 1);
    assert_eq!(pending(&app).await[0]["id"], id.as_str(), "a's still waits");
    task.abort();
}

#[tokio::test]
async fn a_rule_on_an_argument_no_schema_declares_is_a_startup_error() {
    let marker = Marker::new();
    let tool = deploy_tool(
        &marker,
        r#"approval = { pointer = "/enviroment", values = ["prod"] }"#,
    );
    let mut config = callbackd::config::Config::default();
    config.server.listen = "127.0.0.1:0".into();
    let dir = tempfile::tempdir().unwrap();
    config.store.path = dir.path().join("x.db");
    config.tools.command.push(tool);
    let err = match callbackd::App::build(config).await {
        Ok(_) => panic!("a policy on an undeclared argument was accepted"),
        Err(e) => format!("{e:#}"),
    };
    assert!(
        err.contains("deploy") && err.contains("/enviroment"),
        "{err}"
    );
}

#[tokio::test]
async fn a_restart_while_an_approval_is_pending_cancels_it() {
    let marker = Marker::new();
    let tool = deploy_tool(&marker, r#"approval = "always""#);
    let app = TestApp::spawn_with(move |c| {
        c.tools.command.push(tool);
        c.server.shutdown_grace_ms = 300;
    })
    .await;
    app.running_run_r1().await;
    // The bridge's call, on a connection of its own that outlives nothing but the daemon.
    let (addr, auth) = (app.addr, format!("Bearer {}", app.tool_token));
    let bridge = tokio::spawn(async move {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .unwrap();
        tokio::spawn(conn);
        let body = json!({"toolName": "deploy", "args": {"env": "prod"}, "toolCallId": "toolu_1", "agentId": "a1"});
        let req = http::Request::post(TOOL_PATH)
            .header("host", addr.to_string())
            .header("content-type", "application/json")
            .header("authorization", auth)
            .body(http_body_util::Full::new(bytes::Bytes::from(
                body.to_string(),
            )))
            .unwrap();
        sender.send_request(req).await.map(|r| r.status())
    });
    pending(&app).await;
    let tool = deploy_tool(&marker, r#"approval = "always""#);
    let dir = app.stop().await;
    let _ = bridge.await;
    let app = TestApp::spawn_in(dir, move |c| c.tools.command.push(tool)).await;
    let all = app.api_get("/v1/approvals?state=all").await.json();
    assert_eq!(all["approvals"][0]["state"], "cancelled", "{all}");
    let calls = app.api_get("/v1/runs/r1").await.json()["tool_calls"].clone();
    assert_eq!(calls[0]["outcome"], "cancelled", "{calls}");
    assert_eq!(
        calls[0]["cut_off"], false,
        "it never ran: its effect is known"
    );
    assert_eq!(marker.runs(), 0, "the cancelled call ran its tool");
}

#[tokio::test]
async fn callbackd_approvals_and_deny_on_the_command_line() {
    let (app, marker) = spawn(r#"approval = "always""#).await;
    let task = call(&app, "prod", "toolu_1");
    let id = pending(&app).await[0]["id"].as_str().unwrap().to_string();
    let url = format!("http://{}", app.addr);
    let bin = env!("CARGO_BIN_EXE_callbackd");
    let token = app.api_token.clone();
    let run = move |args: &[&str]| {
        let out = std::process::Command::new(bin)
            .args(args)
            .args(["--url", &url, "--token", &token])
            .env_remove("CALLBACKD_CONFIG")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let listed = tokio::task::spawn_blocking({
        let run = run.clone();
        move || run(&["approvals"])
    });
    let listed = listed.await.unwrap();
    assert!(
        listed.contains(&id) && listed.contains("deploy") && listed.contains("pending"),
        "{listed}"
    );
    let denied = tokio::task::spawn_blocking(move || run(&["deny", &id, "--reason", "not today"]))
        .await
        .unwrap();
    assert!(denied.contains("denied by default/api"), "{denied}");
    let result = tokio::time::timeout(T, task).await.unwrap().unwrap();
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("not today"),
        "{result}"
    );
    assert_eq!(marker.runs(), 0, "the denied call ran its tool");
}
