//! `POST /v1/ag-ui` (issue 37) against the real server without a bridge: bad input, and an
//! approval held by the tool service answered through `resume`, the continuation mapped to
//! AG-UI from the events the test stores as the bridge would. The whole flow with the real
//! bridge and the official client is tests/e2e/test_ag_ui_e2e.py.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::TestApp;
use crate::sse::Frame;

const T: Duration = Duration::from_secs(10);

fn detail(r: &crate::helpers::Resp) -> String {
    r.json()["detail"].as_str().unwrap_or_default().to_string()
}

fn input(thread: &str, extra: &Value) -> String {
    let mut body = json!({"threadId": thread, "runId": "agui-1", "messages": [
        {"id": "m1", "role": "user", "content": "hi"}
    ]});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body.to_string()
}

#[tokio::test]
async fn bad_input_is_refused_naming_what_is_wrong() {
    let app = TestApp::spawn().await;
    let token = app.api_token.clone();
    for (body, status, says) in [
        (
            json!({"runId": "r", "messages": []}).to_string(),
            400,
            "threadId is required",
        ),
        (
            json!({"threadId": "t", "runId": "r", "messages": {}}).to_string(),
            400,
            "messages must be a list",
        ),
        (
            json!({"threadId": "t", "runId": "r", "messages": [{"id": "a", "role": "assistant", "content": "x"}]})
                .to_string(),
            400,
            "neither a new user message",
        ),
        ("not json".to_string(), 400, "not the JSON"),
        (
            input("t", &json!({"resume": [{"interruptId": "appr_0", "status": "resolved", "payload": {"approved": true}}]}),
            ),
            409,
            "no interrupt \"appr_0\"",
        ),
        // Frontend tools the bridge would refuse, or that would shadow callbackd's own.
        (
            input("t", &json!({"tools": [{"name": "pick color", "parameters": {"type": "object"}}]})),
            400,
            "tools[0].name \"pick color\" is not a tool name",
        ),
        (
            input("t", &json!({"tools": [{"name": "pick"}, {"name": "pick"}]})),
            400,
            "tools[1].name \"pick\" is declared twice",
        ),
        (
            input("t", &json!({"tools": [{"name": "echo"}]})),
            400,
            "tools[0].name \"echo\" is a tool callbackd serves itself",
        ),
        // A tool message answers a frontend call only while one waits.
        (
            json!({"threadId": "t", "runId": "r", "messages": [
                {"id": "u", "role": "user", "content": "hi"},
                {"id": "a", "role": "assistant", "toolCalls": [{"id": "toolu_x", "type": "function", "function": {"name": "pick", "arguments": "{}"}}]},
                {"id": "m", "role": "tool", "toolCallId": "toolu_x", "content": "red"}]})
            .to_string(),
            409,
            "toolu_x",
        ),
        // A new thread needs the bridge to start its session.
        (input("t", &json!({})), 501, "bridge"),
    ] {
        let r = app.api("POST", "/v1/ag-ui", Some(&token), &body).await;
        assert_eq!(r.status, status, "{body}: {}", r.text());
        assert!(detail(&r).contains(says), "{body}: {}", r.text());
        assert!(r.content_type.starts_with("application/problem+json"), "{}", r.content_type);
    }
    let r = app
        .api("POST", "/v1/ag-ui", None, &input("t", &json!({})))
        .await;
    assert_eq!(r.status, 401);
    let read = app.api_read_token.clone();
    let r = app
        .api("POST", "/v1/ag-ui", Some(&read), &input("t", &json!({})))
        .await;
    assert_eq!(r.status, 403, "{}", r.text());
    // Nothing was started or stored by any of them.
    assert_eq!(app.count("SELECT count(*) FROM ag_ui_threads").await, 0);
    assert_eq!(app.count("SELECT count(*) FROM agents").await, 0);
}

async fn append(app: &TestApp, message: Value) {
    app.store_ok(
        "runEvents",
        "append",
        json!({"runId": "r1", "eventType": "sdk_message", "payload": {"type": "sdk_message", "message": message}}),
    )
    .await;
}

#[tokio::test]
async fn a_held_call_is_an_interrupt_and_resume_streams_the_continuation() {
    let tool: callbackd::config::CommandToolConfig = toml::from_str(
        r#"
name = "deploy"
description = "Deploys"
argv = ["sh", "-c", "echo deployed"]
input_schema = { type = "object", properties = { env = { type = "string", enum = ["dev", "prod"] } } }
approval = "always"
"#,
    )
    .unwrap();
    let app = Arc::new(TestApp::spawn_with(move |c| c.tools.command.push(tool)).await);
    app.running_run_r1().await;
    append(&app, json!({"type": "request"})).await;
    append(
        &app,
        json!({"type": "tool_call", "call_id": "toolu_1", "name": "mcp", "status": "running",
                       "args": {"toolName": "deploy", "args": {"env": "prod"}}}),
    )
    .await;
    let held = {
        let app = app.clone();
        tokio::spawn(async move {
            let body = json!({"toolName": "deploy", "args": {"env": "prod"}, "toolCallId": "toolu_1", "agentId": "a1"});
            app.call_tool_as(&app.tool_token, &body).await
        })
    };
    let approval = loop {
        let r = app.api_get("/v1/approvals").await.json();
        if let Some(a) = r["approvals"].get(0) {
            break a["id"].as_str().unwrap().to_string();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let token = app.api_token.clone();
    // The session's own id is a thread; a new user message while the call waits is refused.
    let r = app
        .api("POST", "/v1/ag-ui", Some(&token), &input("a1", &json!({})))
        .await;
    assert_eq!(r.status, 409, "{}", r.text());
    assert!(detail(&r).contains(&approval), "{}", r.text());
    // Edited arguments the tool refuses: 400, and the approval stays pending.
    let resume = |payload: Value| {
        input(
            "a1",
            &json!({"resume": [{"interruptId": approval, "status": "resolved", "payload": payload}]}),
        )
    };
    let r = app
        .api(
            "POST",
            "/v1/ag-ui",
            Some(&token),
            &resume(json!({"approved": true, "arguments": {"env": "moon"}})),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        detail(&r).contains("resume[0]") && detail(&r).contains("/env"),
        "{}",
        r.text()
    );
    let r = app
        .api(
            "POST",
            "/v1/ag-ui",
            Some(&token),
            &resume(json!({"yes": 1})),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(detail(&r).contains("payload.approved"), "{}", r.text());
    // Approved: the stream starts, the tool runs, and the continuation is mapped.
    let mut s = app
        .sse("POST", "/v1/ag-ui", &[], &resume(json!({"approved": true})))
        .await;
    assert_eq!(s.status, 200, "{:?}", s.problem);
    assert_eq!(s.headers["content-type"], "text/event-stream");
    let first = s.next(T).await.unwrap();
    assert_eq!(
        first.data().unwrap(),
        &json!({"type": "RUN_STARTED", "threadId": "a1", "runId": "agui-1", "protocolVersion": "1.0"})
    );
    let result = held.await.unwrap();
    assert!(result.to_string().contains("deployed"), "{result}");
    let rec = app
        .api_get(&format!("/v1/approvals/{approval}"))
        .await
        .json();
    assert_eq!(rec["state"], "approved");
    append(&app, json!({"type": "tool_call", "call_id": "toolu_1", "name": "mcp", "status": "completed",
                       "args": {"toolName": "deploy", "args": {"env": "prod"}},
                       "result": {"status": "success", "value": {"content": [{"text": {"text": "deployed\n"}}]}}}))
    .await;
    append(
        &app,
        json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "Done."}]}}),
    )
    .await;
    append(&app, json!({"type": "status", "status": "FINISHED"})).await;
    let rest: Vec<Value> = s
        .collect(T)
        .await
        .iter()
        .filter_map(|f| match f {
            Frame::Event { data, .. } => Some(data.clone()),
            Frame::Comment(_) => None,
        })
        .collect();
    let kinds: Vec<&str> = rest.iter().map(|e| e["type"].as_str().unwrap()).collect();
    // The held call was opened by the stored `running` event before the resume: only its
    // result is new here.
    assert_eq!(
        kinds,
        [
            "TOOL_CALL_RESULT",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED"
        ],
        "{rest:?}"
    );
    assert_eq!(rest[0]["toolCallId"], "toolu_1");
    // The tool's own output as callbackd recorded it (the command's stdout, trimmed).
    assert_eq!(rest[0]["content"], "deployed");
    assert_eq!(rest[2]["delta"], "Done.");
    assert_eq!(rest[4]["outcome"], json!({"type": "success"}));
    // Decided once: answering again is a conflict saying what happened.
    let r = app
        .api(
            "POST",
            "/v1/ag-ui",
            Some(&token),
            &resume(json!({"approved": false})),
        )
        .await;
    assert_eq!(r.status, 409, "{}", r.text());
    assert!(detail(&r).contains("already approved"), "{}", r.text());
}

#[tokio::test]
async fn a_thread_alias_answers_as_its_session_and_goes_with_it() {
    let app = TestApp::spawn().await;
    app.running_run_r1().await;
    let ns = callbackd::Namespace::new("default");
    let threads = app.store.clone().thread_records();
    assert_eq!(
        threads.claim_thread(&ns, "t1", "a1", 5).await.unwrap(),
        "a1"
    );
    // A second claim of the thread (a racing first input) gets the first one's session.
    assert_eq!(
        threads.claim_thread(&ns, "t1", "a2", 6).await.unwrap(),
        "a1"
    );
    let r = app.api_get("/v1/sessions/t1").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["session_id"], "a1");
    // Another namespace does not see it.
    let other = callbackd::Namespace::new("other");
    assert_eq!(threads.thread_session(&other, "t1").await.unwrap(), None);
    // Deleting the session deletes the alias.
    app.store_ok("agents", "delete", json!({"filter": {"agentIds": ["a1"]}}))
        .await;
    assert_eq!(threads.thread_session(&ns, "t1").await.unwrap(), None);
    assert_eq!(app.api_get("/v1/sessions/t1").await.status, 404);
}
