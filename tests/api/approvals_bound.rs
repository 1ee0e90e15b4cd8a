//! Issue 25: an approval lives and dies with its call, the record is the truth, and a
//! pending approval belongs to the daemon that holds the call. The tool writes the
//! arguments it ran with to a marker file: its absence proves it never ran.
//!
//! Runs on SQLite, and on PostgreSQL with `CALLBACKD_TEST_BACKEND=postgres`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{run, TestApp, TOOL_PATH};

const T: Duration = Duration::from_secs(10);

fn marker_tool(marker: &Path, extra: &str) -> callbackd::config::CommandToolConfig {
    toml::from_str(&format!(
        r#"
name = "deploy"
description = "Deploys"
argv = ["sh", "-c", "cat > '{}'; echo '{{\"deployed\": true}}'"]
input_schema = {{ type = "object", properties = {{ env = {{ type = "string" }} }} }}
approval = "always"
{extra}
"#,
        marker.display()
    ))
    .unwrap()
}

struct Setup {
    app: Arc<TestApp>,
    marker: PathBuf,
    _marker_dir: tempfile::TempDir,
}

async fn setup(extra: &str, tweak: impl FnOnce(&mut callbackd::config::Config)) -> Setup {
    let marker_dir = tempfile::tempdir().unwrap();
    let marker = marker_dir.path().join("ran.json");
    let tool = marker_tool(&marker, extra);
    let app = TestApp::spawn_with(move |c| {
        c.tools.command.push(tool);
        tweak(c);
    })
    .await;
    app.running_run_r1().await;
    Setup {
        app: Arc::new(app),
        marker,
        _marker_dir: marker_dir,
    }
}

/// The bridge's tool call to `app`, on a connection of its own, in a task of its own: the
/// result the model gets.
fn call(app: &Arc<TestApp>, env: &str) -> tokio::task::JoinHandle<Value> {
    call_tool(app, "deploy", &json!({"env": env}))
}

fn call_tool(app: &Arc<TestApp>, tool: &str, args: &Value) -> tokio::task::JoinHandle<Value> {
    let (addr, auth) = (app.addr, format!("Bearer {}", app.tool_token));
    let body = json!({"toolName": tool, "args": args, "toolCallId": "toolu_1", "agentId": "a1"});
    tokio::spawn(async move {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .unwrap();
        tokio::spawn(conn);
        let req = http::Request::post(TOOL_PATH)
            .header("host", addr.to_string())
            .header("content-type", "application/json")
            .header("authorization", auth)
            .body(http_body_util::Full::new(bytes::Bytes::from(
                body.to_string(),
            )))
            .unwrap();
        let resp = sender.send_request(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        let body = http_body_util::BodyExt::collect(resp.into_body())
            .await
            .unwrap()
            .to_bytes();
        serde_json::from_slice::<Value>(&body).unwrap()["result"].clone()
    })
}

async fn approvals(app: &TestApp, state: &str) -> Vec<Value> {
    let list = app
        .api_get(&format!("/v1/approvals?state={state}"))
        .await
        .json();
    list["approvals"].as_array().cloned().unwrap_or_default()
}

async fn first_pending(app: &TestApp) -> Value {
    for _ in 0..250 {
        if let Some(a) = approvals(app, "pending").await.into_iter().next() {
            return a;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no pending approval appeared");
}

async fn decide(app: &TestApp, id: &str, body: Value) -> crate::helpers::Resp {
    let token = app.api_token.clone();
    app.api(
        "POST",
        &format!("/v1/approvals/{id}"),
        Some(&token),
        &body.to_string(),
    )
    .await
}

fn text(result: &Value) -> String {
    result.to_string()
}

#[tokio::test]
async fn a_run_that_ends_cancels_its_pending_approval_and_the_tool_never_runs() {
    // The poll is an hour: the run's end itself (its `runs.update` through this daemon)
    // cancels the approval.
    let s = setup("", |c| c.tools.approval_poll_ms = 3_600_000).await;
    let task = call(&s.app, "prod");
    let id = first_pending(&s.app).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The run is cancelled while the call waits: the bridge records its end.
    let mut r = run("a1", "r1", 1);
    r["status"] = json!("cancelled");
    s.app
        .store_ok("runs", "update", json!({"run": r.clone()}))
        .await;
    let result = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the held call is answered once its run has ended")
        .unwrap();
    assert_eq!(result["isError"], true, "{result}");
    assert!(text(&result).contains("cancelled"), "{result}");
    let all = approvals(&s.app, "all").await;
    assert_eq!(all[0]["state"], "cancelled", "{all:?}");
    assert!(
        all[0]["reason"].as_str().unwrap().contains("r1"),
        "the reason names the run: {all:?}"
    );
    let late = decide(&s.app, &id, json!({"decision": "approve"})).await;
    assert_eq!(late.status, 409, "{}", late.text());
    assert!(late.text().contains("cancelled"), "{}", late.text());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!s.marker.exists(), "the tool of a cancelled call ran");
    let calls = s.app.api_get("/v1/runs/r1").await.json()["tool_calls"].clone();
    assert_eq!(calls[0]["outcome"], "cancelled", "{calls}");
    assert_eq!(calls[0]["cut_off"], false, "{calls}");
}

/// On PostgreSQL the holder's poll is set to an hour: only the `NOTIFY` the decision sends
/// can wake it. SQLite has no notifications between daemons: there its poll (200 ms here)
/// is what hears the decision.
#[tokio::test]
async fn a_second_daemon_leaves_the_first_ones_approval_pending_and_its_decision_reaches_the_holder(
) {
    let poll = match crate::helpers::backend() {
        crate::helpers::Backend::Postgres => 3_600_000,
        crate::helpers::Backend::Sqlite => 200,
    };
    let s = setup("", |c| c.tools.approval_poll_ms = poll).await;
    let task = call(&s.app, "prod");
    let id = first_pending(&s.app).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    // Daemon B on the same database.
    let (db, pg) = (s.app.db.clone(), s.app.pg.clone());
    let other_marker = s.marker.with_extension("b");
    let tool = marker_tool(&other_marker, "");
    let b = TestApp::spawn_with(move |c| {
        c.tools.command.push(tool);
        match &pg {
            Some(pg) => pg.apply(c),
            None => c.store.path = db,
        }
    })
    .await;
    let pending = approvals(&b, "pending").await;
    assert_eq!(
        pending.len(),
        1,
        "a starting daemon cancelled a live daemon's approval: {:?}",
        approvals(&b, "all").await
    );
    let r = decide(&b, &id, json!({"decision": "approve"})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let result = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the decision made through B reached A")
        .unwrap();
    assert!(text(&result).contains("deployed"), "{result}");
    assert_eq!(
        std::fs::read_to_string(&s.marker).unwrap().trim(),
        r#"{"env":"prod"}"#,
        "the tool ran in the daemon that held the call"
    );
    assert!(!other_marker.exists());
    let one = s.app.api_get(&format!("/v1/approvals/{id}")).await.json();
    assert_eq!(one["state"], "approved", "{one}");
    b.stop().await;
}

#[tokio::test]
async fn stopping_the_daemon_cancels_held_calls_first_and_records_why() {
    let s = setup("", |c| c.server.shutdown_grace_ms = 20_000).await;
    let task = call(&s.app, "prod");
    first_pending(&s.app).await;
    let app = Arc::try_unwrap(s.app).unwrap_or_else(|_| panic!("shared"));
    // The call holds a clone of the app's address only: stopping must answer it.
    let stopping = tokio::spawn(app.stop());
    let result = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("a held call delays shutdown")
        .unwrap();
    assert!(text(&result).contains("callbackd is stopping"), "{result}");
    let dir = stopping.await.unwrap();
    assert!(!s.marker.exists());
    let _ = dir;
}

#[tokio::test]
async fn edited_arguments_are_checked_and_are_what_the_tool_runs_with() {
    let s = setup("", |_| {}).await;
    let task = call(&s.app, "prod");
    let id = first_pending(&s.app).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let bad = decide(
        &s.app,
        &id,
        json!({"decision": "approve", "args": {"env": 5}}),
    )
    .await;
    assert_eq!(bad.status, 400, "{}", bad.text());
    let detail = bad.json()["detail"].as_str().unwrap().to_string();
    assert!(
        detail.contains("/env") && detail.contains("type"),
        "{detail}"
    );
    assert_eq!(approvals(&s.app, "pending").await.len(), 1, "still pending");
    let deny_with_args = decide(
        &s.app,
        &id,
        json!({"decision": "deny", "args": {"env": "dev"}}),
    )
    .await;
    assert_eq!(deny_with_args.status, 400, "{}", deny_with_args.text());
    let ok = decide(
        &s.app,
        &id,
        json!({"decision": "approve", "args": {"env": "staging"}}),
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    let result = task.await.unwrap();
    assert!(text(&result).contains("deployed"), "{result}");
    assert_eq!(
        std::fs::read_to_string(&s.marker).unwrap().trim(),
        r#"{"env":"staging"}"#
    );
    let one = s.app.api_get(&format!("/v1/approvals/{id}")).await.json();
    assert_eq!(one["args"], json!({"env": "prod"}), "{one}");
    assert_eq!(one["approved_args"], json!({"env": "staging"}), "{one}");
    assert_eq!(one["edited"], true, "{one}");
    let again = decide(&s.app, &id, json!({"decision": "deny"})).await;
    assert_eq!(again.status, 409);
    assert!(again.text().contains("approved by"), "{}", again.text());
}

#[tokio::test]
async fn a_tool_marked_confirm_shows_it_on_its_approval_and_a_plain_one_does_not() {
    let s = setup("confirm = true", |_| {}).await;
    let task = call(&s.app, "prod");
    let pending = first_pending(&s.app).await;
    assert_eq!(pending["confirm"], true, "{pending}");
    let id = pending["id"].as_str().unwrap().to_string();
    let one = s.app.api_get(&format!("/v1/approvals/{id}")).await.json();
    assert_eq!(one["confirm"], true, "{one}");
    decide(
        &s.app,
        &id,
        json!({"decision": "deny", "reason": "not now"}),
    )
    .await;
    task.await.unwrap();
    let plain = setup("", |_| {}).await;
    let task = call(&plain.app, "prod");
    let pending = first_pending(&plain.app).await;
    assert_eq!(pending["confirm"], false, "{pending}");
    let id = pending["id"].as_str().unwrap().to_string();
    decide(&plain.app, &id, json!({"decision": "deny"})).await;
    task.await.unwrap();
}

/// `callbackd` with `args` against `app`: (success, stdout, stderr).
async fn cli(app: &TestApp, args: &[&str]) -> (bool, String, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_callbackd"));
    cmd.args(args)
        .args(["--url", &format!("http://{}", app.addr)])
        .args(["--token", &app.api_token])
        .env_remove("CALLBACKD_CONFIG");
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn approve_on_the_command_line_edits_arguments_and_asks_for_yes_on_a_confirm_tool() {
    let s = setup("confirm = true", |_| {}).await;
    let task = call(&s.app, "prod");
    let id = first_pending(&s.app).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    // Not JSON, and JSON the tool's schema refuses: clear errors, still pending.
    let (ok, _, err) = cli(&s.app, &["approve", &id, "--args", "{env: 1", "--yes"]).await;
    assert!(!ok && err.contains("--args is not JSON"), "{err}");
    let (ok, _, err) = cli(
        &s.app,
        &["approve", &id, "--args", r#"{"env": 5}"#, "--yes"],
    )
    .await;
    assert!(!ok, "a refused edit approved");
    assert!(err.contains("/env") && err.contains("type"), "{err}");
    // The tool is marked confirm = true: approving without --yes is refused.
    let (ok, _, err) = cli(&s.app, &["approve", &id, "--args", r#"{"env": "staging"}"#]).await;
    assert!(!ok && err.contains("--yes"), "{err}");
    assert_eq!(approvals(&s.app, "pending").await.len(), 1, "still pending");
    assert!(!s.marker.exists());
    let (ok, out, err) = cli(
        &s.app,
        &["approve", &id, "--args", r#"{"env": "staging"}"#, "--yes"],
    )
    .await;
    assert!(ok, "{err}");
    assert!(out.contains("approved") && out.contains("staging"), "{out}");
    let result = tokio::time::timeout(T, task).await.unwrap().unwrap();
    assert!(text(&result).contains("deployed"), "{result}");
    assert_eq!(
        std::fs::read_to_string(&s.marker).unwrap().trim(),
        r#"{"env":"staging"}"#
    );
}

#[tokio::test]
async fn a_timeout_denies_and_never_runs_the_tool() {
    let s = setup("approval_timeout_ms = 300", |_| {}).await;
    let task = call(&s.app, "prod");
    let result = task.await.unwrap();
    assert!(text(&result).contains("nobody approved"), "{result}");
    let all = approvals(&s.app, "all").await;
    assert_eq!(all[0]["state"], "expired", "{all:?}");
    let id = all[0]["id"].as_str().unwrap();
    let late = decide(&s.app, id, json!({"decision": "approve"})).await;
    assert_eq!(late.status, 409);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!s.marker.exists());
}

#[tokio::test]
async fn ask_user_shows_a_question_and_the_answer_through_resume_is_the_result() {
    let s = setup("", |_| {}).await;
    let mut stream = s.app.stream("r1", None).await;
    assert_eq!(stream.next(T).await.unwrap().kind(), "up_to_date");
    let task = call_tool(
        &s.app,
        "ask_user",
        &json!({"question": "Deploy to prod?", "options": ["yes", "no"]}),
    );
    let q = stream.next(T).await.unwrap();
    assert_eq!(q.kind(), "question");
    let question = q.data().unwrap()["question"].clone();
    assert_eq!(question["text"], "Deploy to prod?");
    assert_eq!(question["options"], json!(["yes", "no"]));
    // The call it holds, so a console can show that call waiting for the answer.
    assert_eq!(question["tool_call_id"], "toolu_1");
    let id = question["id"].as_str().unwrap().to_string();
    // A reconnecting stream shows it again.
    let mut again = s.app.stream("r1", None).await;
    let mut kinds = Vec::new();
    for _ in 0..2 {
        kinds.push(again.next(T).await.unwrap().kind().to_string());
    }
    assert!(kinds.contains(&"question".to_string()), "{kinds:?}");
    let token = s.app.api_token.clone();
    let read = s.app.api_read_token.clone();
    let answer = |tok: String, run: &'static str, body: Value| {
        let app = s.app.clone();
        async move {
            app.api(
                "POST",
                &format!("/v1/runs/{run}/resume"),
                Some(&tok),
                &body.to_string(),
            )
            .await
        }
    };
    let r = answer(
        read.clone(),
        "r1",
        json!({"question_id": id, "answer": "yes"}),
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.text());
    let r = answer(
        token.clone(),
        "r1",
        json!({"question_id": "appr_nope", "answer": "yes"}),
    )
    .await;
    assert_eq!(r.status, 404, "{}", r.text());
    let r = answer(
        token.clone(),
        "r2",
        json!({"question_id": id, "answer": "yes"}),
    )
    .await;
    assert_eq!(r.status, 404, "another run's question: {}", r.text());
    let r = decide(&s.app, &id, json!({"decision": "approve"})).await;
    assert_eq!(
        r.status,
        400,
        "a question is answered, not approved: {}",
        r.text()
    );
    let r = answer(
        token.clone(),
        "r1",
        json!({"question_id": id, "answer": "yes, go"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let result = task.await.unwrap();
    assert_eq!(result["isError"], Value::Null, "{result}");
    assert!(text(&result).contains("yes, go"), "{result}");
    let r = answer(token, "r1", json!({"question_id": id, "answer": "no"})).await;
    assert_eq!(r.status, 409, "{}", r.text());
}
