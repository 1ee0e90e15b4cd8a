//! Issue 21, "see everything an agent did", against the real server on the configured
//! backend (SQLite, or PostgreSQL with `CALLBACKD_TEST_PG`): the run's input in its state,
//! its `run_started` event and the runs list.

use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::TestApp;
use crate::run_api::{append, setup, tool_turn};
use crate::sse::{durable, Frame};

const T: Duration = Duration::from_secs(10);

/// What `POST .../messages` keeps beside a run it started.
async fn record_input(app: &TestApp, run_id: &str, text: &str) {
    let text = text.replace('\'', "''");
    let sql = format!(
        "INSERT INTO run_inputs (ns, run_id, text) VALUES ('default', '{run_id}', '{text}')"
    );
    app.exec(&sql, &sql).await;
}

fn run_started(frames: &[Frame]) -> Value {
    frames
        .iter()
        .find(|f| f.kind() == "run_started")
        .and_then(Frame::data)
        .cloned()
        .unwrap_or_else(|| panic!("no run_started in {frames:?}"))
}

#[tokio::test]
async fn the_run_input_is_in_its_state_its_run_started_event_and_truncated_in_lists() {
    let app = TestApp::spawn().await;
    setup(&app, "r1", "finished").await;
    for m in tool_turn() {
        append(&app, "r1", m).await;
    }
    // 250 characters, most of them two bytes in UTF-8.
    let long = format!("please call the echo tool {}", "é".repeat(224));
    record_input(&app, "r1", &long).await;

    let state = app.api_get("/v1/runs/r1").await;
    assert_eq!(state.status, 200, "{}", state.text());
    assert_eq!(state.json()["input"], json!({"text": long}));

    let live = app.stream("r1", None).await.collect(T).await;
    assert_eq!(run_started(&live)["input"], json!({"text": long}));
    let replay = app.stream("r1", Some(0)).await.collect(T).await;
    assert_eq!(
        durable(&replay),
        durable(&live),
        "a replay sends the same bytes"
    );

    let list = app.api_get("/v1/sessions/a1/runs").await.json();
    let listed = &list["runs"][0]["input"];
    assert_eq!(listed["truncated"], true, "{listed}");
    let cut: String = long.chars().take(200).collect();
    assert_eq!(listed["text"], cut);

    // The openapi document describes the field.
    let doc = app.api_get("/v1/openapi.json").await.text();
    assert!(doc.contains("RunInput"), "{doc}");
}

#[tokio::test]
async fn a_run_started_elsewhere_without_a_user_event_has_no_input_settled_once() {
    let app = TestApp::spawn().await;
    setup(&app, "r1", "finished").await;
    for m in tool_turn() {
        append(&app, "r1", m).await;
    }
    assert_eq!(
        app.api_get("/v1/runs/r1").await.json()["input"],
        Value::Null
    );
    let live = app.stream("r1", None).await.collect(T).await;
    assert_eq!(run_started(&live)["input"], Value::Null);
    // The stream settled it: a text recorded later is not told to a replay.
    assert_eq!(app.count("SELECT count(*) FROM run_inputs").await, 1);
    let late = "INSERT INTO run_inputs (ns, run_id, text) VALUES ('default', 'r1', 'hello') \
                ON CONFLICT DO NOTHING";
    app.exec(late, late).await;
    let replay = app.stream("r1", Some(0)).await.collect(T).await;
    assert_eq!(durable(&replay), durable(&live));
    assert_eq!(
        app.api_get("/v1/runs/r1").await.json()["input"],
        Value::Null
    );
    let list = app.api_get("/v1/sessions/a1/runs").await.json();
    assert_eq!(list["runs"][0]["input"], Value::Null, "{list}");

    app.store_ok("agents", "delete", json!({"filter": {"agentIds": ["a1"]}}))
        .await;
    assert_eq!(app.count("SELECT count(*) FROM run_inputs").await, 0);
}

#[tokio::test]
async fn a_run_started_elsewhere_takes_its_input_from_its_stored_user_event() {
    let app = TestApp::spawn().await;
    setup(&app, "r1", "finished").await;
    let mut turn = tool_turn();
    let user = json!({"type": "user", "agent_id": "a1", "run_id": "r1", "message": {"role": "user",
        "content": [{"type": "text", "text": "please call "}, {"type": "text", "text": "the echo tool"}]}});
    turn.insert(2, user);
    for m in turn {
        append(&app, "r1", m).await;
    }
    let text = json!({"text": "please call the echo tool"});
    // The run's state finds it before anybody reads the stream, and records it.
    assert_eq!(app.api_get("/v1/runs/r1").await.json()["input"], text);
    let live = app.stream("r1", None).await.collect(T).await;
    assert_eq!(run_started(&live)["input"], text);
    let replay = app.stream("r1", Some(0)).await.collect(T).await;
    assert_eq!(durable(&replay), durable(&live));
    let list = app.api_get("/v1/sessions/a1/runs").await.json();
    assert_eq!(list["runs"][0]["input"], text, "{list}");
}

#[tokio::test]
async fn tool_events_carry_arguments_and_result_and_a_big_one_is_whole_at_its_own_url() {
    let app = TestApp::spawn().await;
    setup(&app, "r1", "finished").await;
    // 100 000 characters: over the stream's 64 KiB.
    let big = "ab".repeat(50_000);
    let mut turn = tool_turn();
    turn[4]["result"] =
        json!({"status": "success", "value": {"content": [{"type": "text", "text": big}]}});
    for m in turn {
        append(&app, "r1", m).await;
    }
    let live = app.stream("r1", None).await.collect(T).await;
    let of = |kind: &str| {
        live.iter()
            .find(|f| f.kind() == kind)
            .and_then(Frame::data)
            .cloned()
            .unwrap()
    };
    let started = of("tool_started");
    assert_eq!(started["arguments"], json!({"text": "ping"}));
    assert!(started.get("truncated").is_none(), "{started}");
    let completed = of("tool_completed");
    assert_eq!(completed["truncated"], true);
    let cut = completed["result"].as_str().unwrap();
    assert_eq!(cut.len(), 64 * 1024);
    assert!(
        cut.starts_with(r#"{"status":"success","value":{"content":[{"text":"abab"#)
            || cut.starts_with(r#"{"status":"success""#),
        "{}",
        &cut[..60]
    );
    let replay = app.stream("r1", Some(0)).await.collect(T).await;
    assert_eq!(
        durable(&replay),
        durable(&live),
        "a replay sends the same bytes"
    );

    let whole = app.api_get("/v1/runs/r1/tool_calls/c1").await;
    assert_eq!(whole.status, 200, "{}", whole.text());
    let whole = whole.json();
    assert_eq!(whole["tool"], "echo");
    assert_eq!(whole["status"], "completed");
    assert_eq!(whole["arguments"], json!({"text": "ping"}));
    assert_eq!(whole["result"]["value"]["content"][0]["text"], big);

    let unknown = app.api_get("/v1/runs/r1/tool_calls/nope").await;
    assert_eq!(unknown.status, 404, "{}", unknown.text());
    assert!(unknown.text().contains("nope"), "{}", unknown.text());
    assert_eq!(app.api_get("/v1/runs/r9/tool_calls/c1").await.status, 404);
}

#[tokio::test]
async fn duration_ms_is_the_execution_time_in_the_stream_and_the_run_state() {
    let app = TestApp::spawn().await;
    setup(&app, "r1", "finished").await;
    // callbackd's record: the call ran 21 ms (its stored events are 1 ms apart or less).
    let sql = "INSERT INTO tool_calls (id, ns, agent_id, run_id, tool_call_id, tool, started_at, \
               ended_at, outcome, cut_off) VALUES (1, 'default', 'a1', 'r1', 'c1', 'echo', 1000, 1021, 'ok', 0)";
    let pg = sql.replace(", 0)", ", false)");
    app.exec(sql, &pg).await;
    for m in tool_turn() {
        append(&app, "r1", m).await;
    }
    let live = app.stream("r1", None).await.collect(T).await;
    let completed = live
        .iter()
        .find(|f| f.kind() == "tool_completed")
        .and_then(Frame::data)
        .cloned()
        .unwrap();
    assert_eq!(completed["duration_ms"], 21, "{completed}");
    let state = app.api_get("/v1/runs/r1").await.json();
    assert_eq!(state["tool_calls"][0]["duration_ms"], 21, "{state}");
}
