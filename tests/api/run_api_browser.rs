//! Issue 20, browsers: stream tokens (`POST /v1/runs/{run_id}/stream-token`, then
//! `?access_token=` on that run's stream and nowhere else), CORS for configured origins only,
//! and the `retry:` field every stream starts with.

use std::time::Duration;

use serde_json::json;

use crate::helpers::TestApp;
use crate::run_api::{append, setup, tool_turn};
use crate::sse::{durable, Frame};

const T: Duration = Duration::from_secs(10);

async fn stream_token(app: &TestApp, run_id: &str, bearer: &str) -> (u16, serde_json::Value) {
    let r = app
        .api(
            "POST",
            &format!("/v1/runs/{run_id}/stream-token"),
            Some(bearer),
            "",
        )
        .await;
    (r.status, r.json())
}

#[tokio::test]
async fn a_stream_token_opens_its_runs_stream_and_nothing_else() {
    let app = TestApp::spawn_with(|c| c.api.retry_ms = 1234).await;
    setup(&app, "r1", "running").await;
    for m in tool_turn() {
        append(&app, "r1", m).await;
    }
    let mut r2 = crate::helpers::run("a1", "r2", 2);
    r2["status"] = json!("running");
    app.store_ok("runs", "create", json!({"run": r2})).await;
    let api = app.api_token.clone();
    let read = app.api_read_token.clone();
    // The read-only token may ask for one too.
    let (status, body) = stream_token(&app, "r1", &read).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = stream_token(&app, "r1", &api).await;
    assert_eq!(status, 200, "{body}");
    let token = body["token"].as_str().unwrap().to_string();
    assert!(body["expires_at"].as_str().unwrap().ends_with('Z'));
    // It opens the stream without any header, and the frames are the replay's, with the
    // retry: field first.
    let path = format!("/v1/runs/r1/stream?after=0&access_token={token}");
    let mut s = app.sse_as("GET", &path, None, &[], "").await;
    assert_eq!(s.status, 200, "{:?}", s.problem);
    let frames = s.collect(T).await;
    match &frames[0] {
        Frame::Event { retry, .. } => assert_eq!(*retry, Some(1234), "{frames:?}"),
        other => panic!("{other:?}"),
    }
    let replay = app.stream("r1", None).await.collect(T).await;
    assert_eq!(durable(&frames), durable(&replay));
    assert_eq!(durable(&frames).len(), 8);
    // Last-Event-ID still resumes (what EventSource sends on reconnect).
    let mut s = app
        .sse_as("GET", &path, None, &[("last-event-id", "6")], "")
        .await;
    assert_eq!(s.next(T).await.unwrap().kind(), "usage");
    // Anywhere else: 401.
    for (method, p) in [
        ("GET", format!("/v1/runs/r1?access_token={token}")),
        ("GET", format!("/v1/runs/r1/events?access_token={token}")),
        ("GET", format!("/v1/sessions?access_token={token}")),
        ("POST", format!("/v1/runs/r1/cancel?access_token={token}")),
        (
            "POST",
            format!("/v1/runs/r1/stream-token?access_token={token}"),
        ),
    ] {
        let s = app.sse_as(method, &p, None, &[], "").await;
        assert_eq!(s.status, 401, "{method} {p}");
        let problem = s.problem.unwrap();
        assert_eq!(problem["code"], "unauthenticated");
        assert!(
            problem["detail"].as_str().unwrap().contains("only on GET"),
            "{problem}"
        );
    }
    // As a bearer token: 401, saying what it is.
    let r = app.api("GET", "/v1/runs/r1/stream", Some(&token), "").await;
    assert_eq!(r.status, 401);
    assert!(r.json()["detail"]
        .as_str()
        .unwrap()
        .contains("stream token"));
    // Another run's stream: 401, saying whose it is.
    let p = format!("/v1/runs/r2/stream?access_token={token}");
    let s = app.sse_as("GET", &p, None, &[], "").await;
    assert_eq!(s.status, 401);
    let detail = s.problem.unwrap()["detail"].as_str().unwrap().to_string();
    assert!(detail.contains("belongs to run \"r1\""), "{detail}");
    // Forged: a changed signature, or a changed run in the payload.
    let mut forged: Vec<char> = token.chars().collect();
    let i = forged.len() - 10; // inside the signature
    forged[i] = if forged[i] == 'A' { 'B' } else { 'A' };
    let forged: String = forged.into_iter().collect();
    let p = format!("/v1/runs/r1/stream?access_token={forged}");
    let s = app.sse_as("GET", &p, None, &[], "").await;
    assert_eq!(s.status, 401);
    assert!(s.problem.unwrap()["detail"]
        .as_str()
        .unwrap()
        .contains("not valid"));
    // Not for an unknown run, nor without a token.
    let (status, body) = stream_token(&app, "nope", &api).await;
    assert_eq!((status, body["code"].as_str()), (404, Some("not_found")));
    let r = app.api("POST", "/v1/runs/r1/stream-token", None, "").await;
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn an_expired_stream_token_is_refused_saying_so() {
    let app = TestApp::spawn_with(|c| c.api.stream_token_ttl_ms = 200).await;
    setup(&app, "r1", "running").await;
    append(&app, "r1", tool_turn()[0].clone()).await;
    let api = app.api_token.clone();
    let (_, body) = stream_token(&app, "r1", &api).await;
    let token = body["token"].as_str().unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let p = format!("/v1/runs/r1/stream?access_token={token}");
    let s = app.sse_as("GET", &p, None, &[], "").await;
    assert_eq!(s.status, 401);
    let detail = s.problem.unwrap()["detail"].as_str().unwrap().to_string();
    assert!(detail.contains("expired"), "{detail}");
}

#[tokio::test]
async fn every_stream_starts_with_a_retry_field() {
    let app = TestApp::spawn().await;
    setup(&app, "r1", "running").await;
    // A live run with nothing stored yet: its first block is up_to_date.
    let mut s = app.stream("r1", None).await;
    match s.next(T).await.unwrap() {
        Frame::Event { retry, data, .. } => {
            assert_eq!(retry, Some(1000));
            assert_eq!(data["type"], "up_to_date");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn cors_answers_configured_origins_only() {
    let app =
        TestApp::spawn_with(|c| c.api.cors_origins = vec!["https://app.example".into()]).await;
    setup(&app, "r1", "running").await;
    let preflight = |origin: &'static str| {
        [
            ("origin", origin),
            ("access-control-request-method", "GET"),
            (
                "access-control-request-headers",
                "authorization, last-event-id",
            ),
        ]
    };
    let s = app
        .sse_as(
            "OPTIONS",
            "/v1/runs/r1/stream",
            None,
            &preflight("https://app.example"),
            "",
        )
        .await;
    assert_eq!(s.status, 204);
    assert_eq!(
        s.headers["access-control-allow-origin"],
        "https://app.example"
    );
    let allowed = s.headers["access-control-allow-headers"].to_str().unwrap();
    assert!(allowed.contains("authorization") && allowed.contains("last-event-id"));
    // A request from that origin gets the header; errors too (the page can read them).
    let mut s = app
        .sse(
            "GET",
            "/v1/runs/r1/stream",
            &[("origin", "https://app.example")],
            "",
        )
        .await;
    assert_eq!(s.status, 200);
    assert_eq!(
        s.headers["access-control-allow-origin"],
        "https://app.example"
    );
    assert_eq!(s.next(T).await.unwrap().kind(), "up_to_date");
    let s = app
        .sse_as(
            "GET",
            "/v1/sessions",
            None,
            &[("origin", "https://app.example")],
            "",
        )
        .await;
    assert_eq!(s.status, 401);
    assert_eq!(
        s.headers["access-control-allow-origin"],
        "https://app.example"
    );
    // Any other origin: no CORS header at all, and no preflight answer.
    let s = app
        .sse_as(
            "OPTIONS",
            "/v1/runs/r1/stream",
            None,
            &preflight("https://evil.example"),
            "",
        )
        .await;
    // The router's own answer, as without CORS: no route takes OPTIONS.
    assert_eq!(s.status, 405);
    assert!(s
        .headers
        .keys()
        .all(|k| !k.as_str().starts_with("access-control-")));
    let s = app
        .sse(
            "GET",
            "/v1/sessions",
            &[("origin", "https://app.example.evil")],
            "",
        )
        .await;
    assert_eq!(s.status, 200);
    assert!(s.headers.get("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn without_cors_origins_no_origin_gets_cors_headers() {
    let app = TestApp::spawn().await;
    let s = app
        .sse(
            "GET",
            "/v1/sessions",
            &[("origin", "https://app.example")],
            "",
        )
        .await;
    assert_eq!(s.status, 200);
    assert!(s
        .headers
        .keys()
        .all(|k| !k.as_str().starts_with("access-control-")));
}
