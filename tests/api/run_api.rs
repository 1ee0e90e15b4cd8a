//! The run API (`/v1`) against the real server: the bridge is played by store calls (the
//! appends the bridge makes), so every stream rule is checked without a bridge; the
//! end-to-end suite does the same with the real one.

use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{agent, run, TestApp};
use crate::sse::{durable, Frame};

const T: Duration = Duration::from_secs(10);

fn ev(message: &Value) -> Value {
    json!({"schemaVersion": 1, "type": "sdk_message", "agentId": "a1", "runId": "r1", "message": message})
}

/// The stored messages of a tool turn, in the bridge's order (contract §5.2).
pub(crate) fn tool_turn() -> Vec<Value> {
    vec![
        json!({"type": "request", "agent_id": "a1", "run_id": "r1", "request_id": "q1"}),
        json!({"type": "status", "status": "RUNNING"}),
        json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "Calling echo."}]}}),
        json!({"type": "tool_call", "call_id": "c1", "name": "mcp", "status": "running", "args": {"providerIdentifier": "custom-user-tools", "toolName": "echo", "args": {"text": "ping"}}}),
        json!({"type": "tool_call", "call_id": "c1", "name": "mcp", "status": "completed", "args": {"providerIdentifier": "custom-user-tools", "toolName": "echo", "args": {"text": "ping"}}, "result": {"status": "success", "value": {}}}),
        json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "Done: ping"}]}}),
        json!({"type": "usage", "usage": {"inputTokens": 20, "outputTokens": 12, "cacheReadTokens": 0, "cacheWriteTokens": 0, "totalTokens": 32}}),
        json!({"type": "status", "status": "FINISHED"}),
    ]
}

pub(crate) async fn setup(app: &TestApp, run_id: &str, status: &str) {
    app.store_ok(
        "agents",
        "create",
        json!({"agent": agent("a1", "/ws", 1_780_000_000_000)}),
    )
    .await;
    let mut r = run("a1", run_id, 1);
    r["status"] = json!(status);
    app.store_ok("runs", "create", json!({"run": r})).await;
}

pub(crate) async fn append(app: &TestApp, run_id: &str, message: Value) {
    let mut payload = ev(&message);
    payload["runId"] = json!(run_id);
    app.store_ok(
        "runEvents",
        "append",
        json!({"runId": run_id, "eventType": "run_stream_event", "payload": payload}),
    )
    .await;
}

async fn finish_run(app: &TestApp, run_id: &str) {
    let mut r = run("a1", run_id, 1);
    r["status"] = json!("finished");
    r["endedAt"] = json!(1_780_000_000_500i64);
    app.store_ok("runs", "update", json!({"run": r})).await;
}

#[tokio::test]
async fn a_finished_run_replays_as_typed_events_and_byte_equal_twice() {
    let app = TestApp::spawn().await;
    setup(&app, "r1", "running").await;
    for m in tool_turn() {
        append(&app, "r1", m).await;
    }
    finish_run(&app, "r1").await;
    let mut s = app.stream("r1", None).await;
    assert_eq!(s.status, 200);
    assert_eq!(s.headers["content-type"], "text/event-stream");
    assert_eq!(s.headers["cache-control"], "no-cache, no-transform");
    assert_eq!(s.headers["x-accel-buffering"], "no");
    let frames = s.collect(T).await;
    let types: Vec<&str> = frames.iter().map(Frame::kind).collect();
    assert_eq!(
        types,
        [
            "run_started",
            "step",
            "message_snapshot",
            "tool_started",
            "tool_completed",
            "message_snapshot",
            "usage",
            "completed"
        ],
        "{frames:?}"
    );
    let ids: Vec<u64> = durable(&frames).iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, (1..=8).collect::<Vec<_>>());
    let d = |i: usize| frames[i].data().unwrap().clone();
    assert_eq!(d(0)["agent"], json!({"id": "a1", "model": "composer-2"}));
    assert_eq!(d(0)["session_id"], "a1");
    assert_eq!(d(1)["index"], 1);
    assert_eq!(d(1)["status"], "RUNNING");
    assert_eq!(d(2)["text"], "Calling echo.");
    assert_eq!(d(2)["delta"], 0);
    assert_eq!(d(4)["outcome"], "ok");
    assert_eq!(d(4)["tool"], "echo");
    assert_eq!(d(7)["status"], "finished");
    assert_eq!(d(7)["output"], "Done: ping");
    assert_eq!(d(7)["usage"]["totalTokens"], 32);
    assert!(d(0)["at"].as_str().unwrap().ends_with('Z'));
    // A replay sends exactly the same bytes.
    let again = app.stream("r1", Some(0)).await.collect(T).await;
    assert_eq!(durable(&again), durable(&frames));
    // Resume from 3: exactly 4..8, the same bytes.
    let tail = app.stream("r1", Some(3)).await.collect(T).await;
    assert_eq!(durable(&tail), durable(&frames)[3..]);
    // The JSON page holds the same events.
    let page = app.api_get("/v1/runs/r1/events?after=2&limit=3").await;
    assert_eq!(page.status, 200, "{}", page.text());
    let events = page.json()["events"].as_array().unwrap().clone();
    assert_eq!(events.len(), 3);
    // The same bytes as the stream's `data:`.
    assert!(
        page.text().contains(&durable(&frames)[2].1),
        "{}",
        page.text()
    );
    assert_eq!(page.json()["next_after"], 5);
    // Nothing after the last seq of a terminal run: 204, what stops an EventSource.
    assert_eq!(app.stream("r1", Some(8)).await.status, 204);
    assert_eq!(app.stream("r1", Some(80)).await.status, 204);
}

#[tokio::test]
async fn last_event_id_and_after_the_larger_wins() {
    let app = TestApp::spawn().await;
    setup(&app, "r1", "running").await;
    for m in tool_turn() {
        append(&app, "r1", m).await;
    }
    let mut s = app
        .sse(
            "GET",
            "/v1/runs/r1/stream?after=0",
            &[("last-event-id", "6")],
            "",
        )
        .await;
    let first = s.next(T).await.unwrap();
    assert_eq!(first.kind(), "usage", "{first:?}");
    let mut s = app
        .sse(
            "GET",
            "/v1/runs/r1/stream?after=7",
            &[("last-event-id", "2")],
            "",
        )
        .await;
    assert_eq!(s.next(T).await.unwrap().kind(), "completed");
}

#[tokio::test]
async fn a_live_run_is_followed_to_its_terminal_event() {
    let app = TestApp::spawn().await;
    setup(&app, "r1", "running").await;
    let turn = tool_turn();
    append(&app, "r1", turn[0].clone()).await;
    let mut s = app.stream("r1", None).await;
    assert_eq!(s.next(T).await.unwrap().kind(), "run_started");
    let up = s.next(T).await.unwrap();
    assert_eq!(up.kind(), "up_to_date");
    assert_eq!(up.data().unwrap()["last_seq"], 1);
    assert!(
        matches!(up, Frame::Event { id: None, .. }),
        "control events carry no id"
    );
    for m in &turn[1..] {
        append(&app, "r1", m.clone()).await;
    }
    let rest = s.collect(T).await;
    let ids: Vec<u64> = durable(&rest).iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, (2..=8).collect::<Vec<_>>(), "{rest:?}");
    assert_eq!(rest.last().unwrap().kind(), "completed");
}

#[tokio::test]
async fn random_disconnects_of_a_live_run_yield_every_seq_exactly_once() {
    let app = std::sync::Arc::new(TestApp::spawn().await);
    setup(&app, "r1", "running").await;
    let writer = {
        let app = app.clone();
        tokio::spawn(async move {
            append(&app, "r1", tool_turn()[0].clone()).await;
            for i in 0..150 {
                append(
                    &app,
                    "r1",
                    json!({"type": "thinking", "text": format!("t{i}")}),
                )
                .await;
                if i % 7 == 0 {
                    tokio::time::sleep(Duration::from_millis(3)).await;
                }
            }
            append(&app, "r1", json!({"type": "status", "status": "FINISHED"})).await;
        })
    };
    let mut seen = Vec::new();
    let mut last = 0u64;
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    'outer: for _ in 0..500 {
        let mut s = app.stream("r1", Some(last)).await;
        if s.status == 204 {
            break;
        }
        assert_eq!(s.status, 200);
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let take = 1 + rng % 19;
        let mut got = 0;
        while let Some(f) = s.next(T).await {
            if let Frame::Event {
                id: Some(id), data, ..
            } = &f
            {
                seen.push(*id);
                last = *id;
                got += 1;
                if data["type"] == "completed" {
                    break 'outer;
                }
                if got >= take {
                    break; // drop the connection mid-stream
                }
            }
        }
    }
    writer.await.unwrap();
    assert_eq!(seen, (1..=152).collect::<Vec<_>>());
}

#[tokio::test]
async fn twenty_followers_of_one_live_run_each_get_the_whole_sequence() {
    let app = std::sync::Arc::new(TestApp::spawn().await);
    setup(&app, "r1", "running").await;
    let mut followers = Vec::new();
    for _ in 0..20 {
        let app = app.clone();
        followers.push(tokio::spawn(async move {
            let mut s = app.stream("r1", None).await;
            durable(&s.collect(T).await)
        }));
    }
    for m in tool_turn() {
        append(&app, "r1", m).await;
    }
    let first = followers.remove(0).await.unwrap();
    assert_eq!(first.len(), 8);
    for f in followers {
        assert_eq!(f.await.unwrap(), first);
    }
}

#[tokio::test]
async fn keepalives_while_nothing_happens_and_reconnect_at_the_maximum_duration() {
    let app = TestApp::spawn_with(|c| {
        c.api.keepalive_ms = 100;
        c.api.max_stream_ms = 700;
        c.api.retry_ms = 250;
    })
    .await;
    setup(&app, "r1", "running").await;
    append(&app, "r1", tool_turn()[0].clone()).await;
    // Its prompt, so that `run_started` does not wait for it (api/prompt.rs).
    let user = json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "hi"}]}});
    append(&app, "r1", user).await;
    let mut s = app.stream("r1", None).await;
    let frames = s.collect(Duration::from_secs(5)).await;
    assert!(
        frames
            .iter()
            .any(|f| matches!(f, Frame::Comment(c) if c == "keepalive")),
        "{frames:?}"
    );
    let last = frames.last().unwrap();
    assert_eq!(last.kind(), "reconnect");
    match last {
        Frame::Event {
            id, retry, data, ..
        } => {
            assert_eq!(*id, None);
            assert_eq!(*retry, Some(250));
            assert_eq!(data["after_seq"], 2);
            assert_eq!(data["retry_ms"], 250);
        }
        other => panic!("{other:?}"),
    }
    // Continuing from after_seq gets what came since, exactly.
    append(&app, "r1", tool_turn()[1].clone()).await;
    let mut s = app.stream("r1", Some(2)).await;
    let f = s.next(T).await.unwrap();
    assert!(matches!(f, Frame::Event { id: Some(3), .. }), "{f:?}");
}

#[tokio::test]
async fn a_hole_in_the_numbering_is_a_stream_gap() {
    let app = TestApp::spawn().await;
    setup(&app, "r1", "running").await;
    for m in tool_turn() {
        append(&app, "r1", m).await;
    }
    let hole = "DELETE FROM run_events WHERE run_id = 'r1' AND seq = 3";
    app.exec(hole, hole).await;
    let frames = app.stream("r1", None).await.collect(T).await;
    assert_eq!(durable(&frames).len(), 2);
    let gap = frames.last().unwrap();
    assert_eq!(gap.kind(), "stream_gap", "{frames:?}");
    assert_eq!(gap.data().unwrap()["after_seq"], 2);
}

#[tokio::test]
async fn an_error_run_carries_the_bridge_failure_text() {
    let app = TestApp::spawn().await;
    setup(&app, "r1", "running").await;
    append(&app, "r1", tool_turn()[0].clone()).await;
    append(
        &app,
        "r1",
        json!({"type": "status", "status": "ERROR", "message": "[resource_exhausted] fake backend: rate limited"}),
    )
    .await;
    let frames = app.stream("r1", None).await.collect(T).await;
    let e = frames.last().unwrap().data().unwrap().clone();
    assert_eq!(e["type"], "error");
    assert_eq!(e["status"], "error");
    assert_eq!(
        e["problem"]["detail"],
        "[resource_exhausted] fake backend: rate limited"
    );
    assert_eq!(e["problem"]["code"], "resource_exhausted");
}

#[tokio::test]
async fn open_streams_end_with_reconnect_at_shutdown_without_holding_the_drain() {
    let app = TestApp::spawn_with(|c| c.server.shutdown_grace_ms = 20_000).await;
    setup(&app, "r1", "running").await;
    append(&app, "r1", tool_turn()[0].clone()).await;
    let mut s = app.stream("r1", None).await;
    assert_eq!(s.next(T).await.unwrap().kind(), "run_started");
    assert_eq!(s.next(T).await.unwrap().kind(), "up_to_date");
    let started = std::time::Instant::now();
    let stopping = tokio::spawn(app.stop());
    let f = s.next(T).await.unwrap();
    assert_eq!(f.kind(), "reconnect", "{f:?}");
    stopping.await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the drain waited for the stream"
    );
}

#[tokio::test]
async fn auth_rules_of_the_run_api() {
    let app = TestApp::spawn().await;
    setup(&app, "r1", "finished").await;
    let r = app.api("GET", "/v1/sessions", None, "").await;
    assert_eq!(r.status, 401);
    assert_eq!(r.content_type, "application/problem+json");
    assert_eq!(r.json()["code"], "unauthenticated");
    assert!(r.json()["detail"]
        .as_str()
        .unwrap()
        .contains("Authorization"));
    let store = app.store_token.clone();
    let r = app.api("GET", "/v1/sessions", Some(&store), "").await;
    assert_eq!(r.status, 401);
    assert!(
        r.json()["detail"].as_str().unwrap().contains("bridge"),
        "{}",
        r.text()
    );
    let r = app.api("GET", "/v1/sessions", Some("nope"), "").await;
    assert_eq!(r.status, 401);
    // The read-only token reads, and cannot write.
    let read = app.api_read_token.clone();
    let r = app.api("GET", "/v1/sessions", Some(&read), "").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["sessions"][0]["session_id"], "a1");
    let r = app.api("POST", "/v1/sessions", Some(&read), "{}").await;
    assert_eq!(r.status, 403);
    assert_eq!(r.json()["code"], "permission_denied");
    let r = app.api("POST", "/v1/runs/r1/cancel", Some(&read), "").await;
    assert_eq!(r.status, 403);
    let who = app.api("GET", "/v1/whoami", Some(&read), "").await;
    assert_eq!(who.json()["role"], "read");
    // The API token is not a store token.
    let api = app.api_token.clone();
    let r = app
        .request(
            "POST",
            crate::helpers::STORE_PATH,
            &[
                ("content-type", "application/json"),
                ("authorization", &format!("Bearer {api}")),
            ],
            r#"{"substore":"agents","method":"get","input":{"agentId":"a1"}}"#,
            crate::helpers::Framing::ContentLength,
        )
        .await;
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn bad_requests_get_problems_and_change_nothing() {
    let app = TestApp::spawn_with(|c| c.api.max_body_bytes = 2048).await;
    setup(&app, "r1", "finished").await;
    append(&app, "r1", tool_turn()[0].clone()).await;
    let before = app.count("SELECT count(*) FROM run_events").await
        + app.count("SELECT count(*) FROM agents").await;
    let token = app.api_token.clone();
    let big = format!(r#"{{"model": "{}"}}"#, "x".repeat(4000));
    let cases: Vec<(&str, String, &str, u16, &str)> = vec![
        ("GET", "/v1/runs/nope".into(), "", 404, "not_found"),
        ("GET", "/v1/sessions/nope".into(), "", 404, "not_found"),
        ("GET", "/v1/sessions/nope/runs".into(), "", 404, "not_found"),
        ("GET", "/v1/runs/nope/stream".into(), "", 404, "not_found"),
        (
            "GET",
            "/v1/runs/r1/stream?after=-1".into(),
            "",
            400,
            "invalid_argument",
        ),
        (
            "GET",
            "/v1/runs/r1/stream?after=abc".into(),
            "",
            400,
            "invalid_argument",
        ),
        (
            "GET",
            "/v1/runs/r1/events?limit=0".into(),
            "",
            400,
            "invalid_argument",
        ),
        (
            "GET",
            "/v1/sessions?cursor=%zz".into(),
            "",
            400,
            "invalid_argument",
        ),
        (
            "GET",
            "/v1/sessions?cursor=bogus".into(),
            "",
            400,
            "invalid_argument",
        ),
        ("GET", "/v1/nowhere".into(), "", 404, "not_found"),
        (
            "POST",
            "/v1/sessions/a1/messages".into(),
            "{not json",
            400,
            "invalid_argument",
        ),
        (
            "POST",
            "/v1/sessions/a1/messages".into(),
            "{}",
            400,
            "invalid_argument",
        ),
        (
            "POST",
            "/v1/sessions/a1/messages".into(),
            r#"{"text": 5}"#,
            400,
            "invalid_argument",
        ),
        (
            "POST",
            "/v1/sessions/nope/messages".into(),
            r#"{"text": "hi"}"#,
            404,
            "not_found",
        ),
        (
            "POST",
            "/v1/sessions/a1/messages".into(),
            r#"{"text": "hi"}"#,
            501,
            "not_implemented",
        ),
        (
            "POST",
            "/v1/sessions".into(),
            r#"{"tools": 3}"#,
            400,
            "invalid_argument",
        ),
        ("POST", "/v1/sessions".into(), "{}", 501, "not_implemented"),
        (
            "POST",
            "/v1/runs/r1/cancel".into(),
            "",
            409,
            "failed_precondition",
        ),
        (
            "POST",
            "/v1/sessions".into(),
            &big,
            413,
            "payload_too_large",
        ),
        (
            "DELETE",
            "/v1/sessions".into(),
            "",
            405,
            "method_not_allowed",
        ),
        ("POST", "/v1/sessions".into(), "", 400, "invalid_argument"),
        // A bad name is refused before anything is asked of the bridge (as PATCH refuses it).
        (
            "POST",
            "/v1/sessions".into(),
            r#"{"name": "  "}"#,
            400,
            "invalid_argument",
        ),
        (
            "POST",
            "/v1/sessions".into(),
            r#"{"name": 7}"#,
            400,
            "invalid_argument",
        ),
    ];
    for (method, path, body, status, code) in cases {
        let r = app.api(method, &path, Some(&token), body).await;
        assert_eq!(r.status, status, "{method} {path} {body}: {}", r.text());
        assert_eq!(
            r.content_type, "application/problem+json",
            "{method} {path}"
        );
        let p = r.json();
        assert_eq!(p["code"], code, "{method} {path}: {p}");
        assert_eq!(p["status"], status);
        assert!(!p["detail"].as_str().unwrap().is_empty());
        if body.contains("name") {
            assert!(
                p["detail"].as_str().unwrap().starts_with("name must"),
                "{body}: {p}"
            );
        }
    }
    let after = app.count("SELECT count(*) FROM run_events").await
        + app.count("SELECT count(*) FROM agents").await;
    assert_eq!(before, after);
}

#[tokio::test]
async fn too_many_streams_are_refused_with_their_own_cap() {
    let app = TestApp::spawn_with(|c| {
        c.api.max_streams = 1;
        c.server.max_connections = 1000;
    })
    .await;
    setup(&app, "r1", "running").await;
    let mut first = app.stream("r1", None).await;
    assert_eq!(first.status, 200);
    let second = app.stream("r1", None).await;
    assert_eq!(second.status, 429);
    assert_eq!(second.problem.unwrap()["code"], "resource_exhausted");
    drop(first.next(T).await);
}

#[tokio::test]
async fn prune_removes_old_events_answers_410_and_returns_the_space() {
    let dir = tempfile::tempdir().unwrap();
    let app = TestApp::spawn_in(dir, |_| {}).await;
    setup(&app, "r1", "running").await;
    append(&app, "r1", tool_turn()[0].clone()).await;
    for i in 0..1500 {
        append(
            &app,
            "r1",
            json!({"type": "thinking", "text": format!("{i}{}", "x".repeat(2000))}),
        )
        .await;
    }
    append(&app, "r1", json!({"type": "status", "status": "FINISHED"})).await;
    finish_run(&app, "r1").await;
    // PostgreSQL: pruned by the running daemon's records (the space is the server's).
    let app = if app.pg.is_some() {
        let records = app.store.clone().run_records();
        let report = callbackd::api::retention::prune(&*records, Duration::ZERO, 10)
            .await
            .unwrap();
        assert_eq!((report.runs, report.events), (1, 1502));
        app
    } else {
        let db = app.db.clone();
        let dir = app.stop().await;
        let size_before = std::fs::metadata(&db).unwrap().len();
        let store = callbackd::store::sqlite::SqliteStore::open(
            &callbackd::store::sqlite::SqliteOptions::new(&db),
        )
        .unwrap();
        let report = callbackd::api::retention::prune(&store, Duration::ZERO, 10)
            .await
            .unwrap();
        assert_eq!((report.runs, report.events), (1, 1502));
        drop(store);
        let size_after = std::fs::metadata(&db).unwrap().len();
        println!("database file: {size_before} bytes before prune, {size_after} after");
        assert!(
            size_after * 4 < size_before,
            "{size_before} -> {size_after}"
        );
        TestApp::spawn_in(dir, |_| {}).await
    };
    let s = app.stream("r1", None).await;
    assert_eq!(s.status, 410);
    assert_eq!(s.problem.unwrap()["code"], "replay_expired");
    assert_eq!(app.api_get("/v1/runs/r1/events").await.status, 410);
    assert_eq!(app.stream("r1", Some(1502)).await.status, 204);
    let state = app.api_get("/v1/runs/r1").await.json();
    assert_eq!(state["status"], "finished");
    assert_eq!(state["events_expired_through"], 1502);
    assert_eq!(state["last_seq"], 1502);
    // Listed, its position is where its removed events went.
    let runs = app.api_get("/v1/runs").await.json();
    assert_eq!(runs["runs"][0]["run_id"], "r1");
    assert_eq!(runs["runs"][0]["last_seq"], 1502);
}

#[tokio::test]
async fn the_openapi_document_lists_every_route_and_the_stream_events() {
    let app = TestApp::spawn().await;
    let r = app.api("GET", "/v1/openapi.json", None, "").await;
    assert_eq!(r.status, 200);
    let doc = r.json();
    assert_eq!(doc["openapi"], "3.2.0");
    for path in callbackd::api::openapi::paths() {
        assert!(doc["paths"][path].is_object(), "{path} missing");
    }
    for (path, method) in [
        ("/v1/sessions", "post"),
        ("/v1/sessions", "get"),
        ("/v1/sessions/{session_id}/messages", "post"),
        ("/v1/runs/{run_id}/stream", "get"),
        ("/v1/runs/{run_id}/cancel", "post"),
    ] {
        assert!(doc["paths"][path][method].is_object(), "{method} {path}");
    }
    let variants = doc["components"]["schemas"]["StreamEvent"]["oneOf"]
        .as_array()
        .unwrap();
    let types: Vec<&str> = variants
        .iter()
        .filter_map(|v| v["properties"]["type"]["const"].as_str())
        .collect();
    for t in [
        "run_started",
        "step",
        "message_snapshot",
        "token",
        "tool_started",
        "tool_completed",
        "tool_outcome_unknown",
        "task",
        "usage",
        "completed",
        "error",
        "sdk_message",
        "reconnect",
        "stream_gap",
        "up_to_date",
    ] {
        assert!(types.contains(&t), "{t} missing from {types:?}");
    }
    // Every $ref resolves.
    let text = doc.to_string();
    for part in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = &part[..part.find('"').unwrap()];
        assert!(
            doc["components"]["schemas"][name].is_object(),
            "dangling $ref {name}"
        );
    }
}

#[tokio::test]
async fn sessions_and_runs_are_listed_from_the_store() {
    let app = TestApp::spawn().await;
    setup(&app, "r1", "finished").await;
    for m in tool_turn() {
        append(&app, "r1", m).await;
    }
    let s = app.api_get("/v1/sessions/a1").await;
    assert_eq!(s.status, 200, "{}", s.text());
    let s = s.json();
    assert_eq!(s["session_id"], "a1");
    assert_eq!(s["cwd"], "/ws");
    assert_eq!(s["model"], "composer-2");
    // Two more turns: one with no events yet, one with two (a page reads all their
    // positions in one store call).
    app.store_ok("runs", "create", json!({"run": run("a1", "r2", 2)}))
        .await;
    app.store_ok("runs", "create", json!({"run": run("a1", "r3", 3)}))
        .await;
    for m in &tool_turn()[..2] {
        append(&app, "r3", m.clone()).await;
    }
    // r3's terminal event is stored, its document still says running (the bridge updates
    // it later): listed as ended all the same.
    append(&app, "r3", json!({"type": "status", "status": "FINISHED"})).await;
    let runs = app.api_get("/v1/sessions/a1/runs").await.json();
    let listed: Vec<(Value, Value, Value)> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["run_id"].clone(),
                r["last_seq"].clone(),
                r["status"].clone(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            (json!("r1"), json!(8), json!("finished")),
            (json!("r2"), json!(0), json!("queued")),
            (json!("r3"), json!(3), json!("finished"))
        ]
    );
    let state = app.api_get("/v1/runs/r1").await.json();
    assert_eq!(state["session_id"], "a1");
    // Every tool call of the run, built-in or not, with what it ran with and returned.
    let calls = state["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{state}");
    assert_eq!(calls[0]["tool"], "echo");
    assert_eq!(calls[0]["outcome"], "ok");
    assert_eq!(calls[0]["arguments"], json!({"text": "ping"}));
    assert_eq!(
        calls[0]["result"],
        json!({"status": "success", "value": {}})
    );
}

/// A session's `model` is its latest run's, latest as `runs.list` orders them (turn number,
/// then run id): never an earlier turn's, nor another agent's later one.
#[tokio::test]
async fn a_sessions_model_is_that_of_its_latest_run() {
    let app = TestApp::spawn().await;
    setup(&app, "r1", "finished").await;
    for (agent, run_id, turn, model) in [
        ("a1", "r-b", 2, "turn-2-b"),
        ("a1", "r-c", 2, "turn-2-c"),
        ("a1", "r-a", 2, "turn-2-a"),
        ("a2", "r-z", 9, "other-agent"),
    ] {
        let mut r = run(agent, run_id, turn);
        r["model"] = json!({"id": model});
        app.store_ok("runs", "create", json!({"run": r})).await;
    }
    let session = app.api_get("/v1/sessions/a1").await.json();
    assert_eq!(session["model"], "turn-2-c", "{session}");
    let listed = app.api_get("/v1/sessions").await.json();
    let a1 = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["session_id"] == "a1")
        .cloned()
        .unwrap();
    assert_eq!(a1["model"], "turn-2-c", "{listed}");
}

#[tokio::test]
async fn streams_do_not_count_against_the_callback_connection_cap() {
    let app = TestApp::spawn_with(|c| c.server.max_connections = 2).await;
    setup(&app, "r1", "running").await;
    let mut streams = Vec::new();
    for _ in 0..4 {
        let mut s = tokio::time::timeout(T, app.stream("r1", None))
            .await
            .expect("a stream waited for a callback connection slot");
        assert_eq!(s.status, 200);
        assert_eq!(s.headers["connection"], "close");
        assert_eq!(s.next(T).await.unwrap().kind(), "up_to_date");
        streams.push(s);
    }
    // The bridge's callbacks still get through, and the streams see the append.
    tokio::time::timeout(T, append(&app, "r1", tool_turn()[0].clone()))
        .await
        .expect("a store call was held up by open streams");
    for s in &mut streams {
        assert_eq!(s.next(T).await.unwrap().kind(), "run_started");
    }
}

#[tokio::test]
async fn metrics_count_open_streams_followers_and_retention() {
    let app = TestApp::spawn_with(|c| {
        c.retention.events_max_age = Some("1ms".into());
        c.retention.interval = "100ms".into();
    })
    .await;
    setup(&app, "r1", "running").await;
    let metrics = || async {
        let text = app.api("GET", "/metrics", None, "").await.text();
        let metric = |name: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {text}"))
        };
        (
            metric("callbackd_streams_open"),
            metric("callbackd_stream_followers"),
            metric("callbackd_retention_removed_total"),
        )
    };
    // Polls until the figures are `want` (a stream task notices its reader is gone at its
    // next frame, retention runs every 100 ms).
    let settle = |want: (f64, f64, f64)| async move {
        let deadline = std::time::Instant::now() + T;
        loop {
            let got = metrics().await;
            if got == want || std::time::Instant::now() > deadline {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    // Two streams caught up on the live run: two open, two following.
    let mut first = app.stream("r1", None).await;
    assert_eq!(first.next(T).await.unwrap().kind(), "up_to_date");
    let mut second = app.stream("r1", None).await;
    assert_eq!(second.next(T).await.unwrap().kind(), "up_to_date");
    assert_eq!(metrics().await, (2.0, 2.0, 0.0), "two open, two following");

    // One reader goes: one of each is left.
    drop(first);
    let turn = tool_turn();
    append(&app, "r1", turn[0].clone()).await;
    assert_eq!(settle((1.0, 1.0, 0.0)).await, (1.0, 1.0, 0.0), "one left");

    // An ended run of 3 events: retention counts the 3 events it removed, not the run.
    let mut r = run("a1", "r2", 1);
    r["status"] = json!("running");
    app.store_ok("runs", "create", json!({"run": r})).await;
    for i in 0..3 {
        append(
            &app,
            "r2",
            json!({"type": "thinking", "text": format!("{i}")}),
        )
        .await;
    }
    finish_run(&app, "r2").await;
    assert_eq!(settle((1.0, 1.0, 3.0)).await, (1.0, 1.0, 3.0), "3 removed");

    // The live run ends: its last stream completes and stops following.
    for m in &turn[1..] {
        append(&app, "r1", m.clone()).await;
    }
    let frames = second.collect(T).await;
    assert_eq!(frames.last().unwrap().kind(), "completed");
    assert_eq!(settle((0.0, 0.0, 3.0)).await, (0.0, 0.0, 3.0), "none open");
}

/// The daemon's own periodic retention (not a direct `prune`) removes the events of ended
/// runs and counts them, in the unit its help text names.
#[tokio::test]
async fn periodic_retention_removes_ended_runs_events_and_counts_them() {
    let app = TestApp::spawn_with(|c| {
        c.retention.events_max_age = Some("1ms".into());
        c.retention.interval = "100ms".into();
        c.retention.batch_runs = 1;
    })
    .await;
    // Two ended runs of 3 and 4 events, and a live one that keeps its 2.
    setup(&app, "r1", "running").await;
    for (run_id, events, ended) in [("r1", 3, true), ("r2", 4, true), ("r3", 2, false)] {
        if run_id != "r1" {
            let mut r = run("a1", run_id, 1);
            r["status"] = json!("running");
            app.store_ok("runs", "create", json!({"run": r})).await;
        }
        for i in 0..events {
            append(
                &app,
                run_id,
                json!({"type": "thinking", "text": format!("{i}")}),
            )
            .await;
        }
        if ended {
            finish_run(&app, run_id).await;
        }
    }
    let count = || async {
        let text = app.api("GET", "/metrics", None, "").await.text();
        let help = text
            .lines()
            .find(|l| l.starts_with("# HELP callbackd_retention_removed"))
            .map(str::to_string);
        let value = text
            .lines()
            .find_map(|l| l.strip_prefix("callbackd_retention_removed_total "))
            .and_then(|v| v.parse::<f64>().ok());
        (help, value)
    };
    let deadline = std::time::Instant::now() + T;
    let (help, value) = loop {
        let (help, value) = count().await;
        if value == Some(7.0) || std::time::Instant::now() > deadline {
            break (help, value);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(value, Some(7.0), "7 events of 2 runs removed");
    let help = help.unwrap_or_default();
    assert!(help.contains(" Run events removed by retention"), "{help}");
    for (run_id, kept) in [("r1", 0), ("r2", 0), ("r3", 2)] {
        let events = app
            .store_ok("runEvents", "list", json!({"runId": run_id}))
            .await;
        let n = events.unwrap()["items"].as_array().unwrap().len();
        assert_eq!(n, kept, "{run_id}");
    }
    // Nothing more to remove: the count stays.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(count().await.1, Some(7.0));
}

#[tokio::test]
async fn after_the_stored_terminal_event_is_204_even_before_the_document_says_so() {
    let app = TestApp::spawn().await;
    setup(&app, "r1", "running").await;
    for m in tool_turn() {
        append(&app, "r1", m).await;
    }
    // The document still says running (the bridge updates it later, or died first).
    let s = tokio::time::timeout(T, app.stream("r1", Some(8)))
        .await
        .unwrap();
    assert_eq!(s.status, 204);
    let mut s = app.stream("r1", Some(7)).await;
    assert_eq!(s.next(T).await.unwrap().kind(), "completed");
}

/// Found by Schemathesis with a stored run pinned (issue 35): the document allows any u64
/// as `after`, and the page's hole check counted seqs from `after + 1` (a panic in debug).
#[tokio::test]
async fn a_position_near_u64_max_is_an_empty_page_and_a_quiet_stream() {
    let app = TestApp::spawn_with(|c| c.api.keepalive_ms = 100).await;
    setup(&app, "r1", "running").await;
    for m in tool_turn().into_iter().take(3) {
        append(&app, "r1", m).await;
    }
    for after in [u64::MAX, u64::MAX - 1] {
        let page = app
            .api_get(&format!("/v1/runs/r1/events?after={after}"))
            .await;
        assert_eq!(page.status, 200, "{}", page.text());
        assert_eq!(page.json()["events"], json!([]), "{}", page.text());
        // No durable event to send.
        let mut s = app.stream("r1", Some(after)).await;
        for _ in 0..2 {
            let f = s.next(T).await;
            let quiet = matches!(f, Some(Frame::Comment(_) | Frame::Event { id: None, .. }));
            assert!(quiet, "{f:?}");
        }
    }
    assert_eq!(app.api_get("/v1/runs/r1").await.status, 200);
}
