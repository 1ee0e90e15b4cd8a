//! `GET /metrics`: the Prometheus exposition of the real daemon after real calls, and its
//! own token (the bridge's tokens never open it).

use callbackd::secret::Secret;
use serde_json::json;

use crate::helpers::{agent, Framing, Resp, TestApp, TOOL_PATH};

async fn scrape(app: &TestApp, auth: Option<&str>) -> Resp {
    let header;
    let mut headers = vec![];
    if let Some(token) = auth {
        header = format!("Bearer {token}");
        headers.push(("authorization", header.as_str()));
    }
    app.request("GET", "/metrics", &headers, "", Framing::ContentLength)
        .await
}

/// The value of the sample line starting with `series` (name and labels, exactly).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.parse().expect("a number"))
}

async fn tool(app: &TestApp, name: &str) -> Resp {
    let auth = format!("Bearer {}", app.tool_token);
    let body = json!({"toolName": name, "args": {"x": 1}, "toolCallId": "t1", "agentId": "a1"});
    app.request(
        "POST",
        TOOL_PATH,
        &[
            ("content-type", "application/json"),
            ("authorization", &auth),
        ],
        body.to_string(),
        Framing::Chunked,
    )
    .await
}

#[tokio::test]
async fn metrics_count_store_and_tool_calls_appends_and_file_sizes() {
    let app = TestApp::spawn_sqlite().await;
    for i in 0..5 {
        app.store_ok(
            "runEvents",
            "append",
            json!({"runId": "r1", "eventType": "sdk_message", "payload": {"i": i}}),
        )
        .await;
    }
    // An idempotent repeat is a call, not a new event.
    for _ in 0..2 {
        app.store_ok(
            "runEvents",
            "append",
            json!({"runId": "r1", "eventType": "e", "payload": null, "idempotencyKey": "k"}),
        )
        .await;
    }
    let (code, _) = app
        .store_err(
            "agents",
            "update",
            json!({"agent": agent("nobody", "/w", 1)}),
        )
        .await;
    assert_eq!(code, "not_found");
    // Refused in validation: counted under its call, once substore and method are read; a
    // body refused before that under "(undecoded)".
    app.store_err("agents", "get", json!({})).await;
    app.store_raw("not json", Framing::Chunked).await;
    assert_eq!(tool(&app, "echo").await.status, 200);
    assert_eq!(tool(&app, "no-such-tool-7f3a").await.status, 404);

    let resp = scrape(&app, None).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        resp.content_type,
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = resp.text();
    let count = |series: &str| sample(&text, series).unwrap_or_else(|| panic!("{series}\n{text}"));
    assert_eq!(
        count(
            r#"callbackd_store_call_duration_seconds_count{namespace="default",call="runEvents.append",outcome="ok"}"#
        ),
        7.0
    );
    assert_eq!(
        count(
            r#"callbackd_store_call_duration_seconds_bucket{namespace="default",call="runEvents.append",outcome="ok",le="+Inf"}"#
        ),
        7.0
    );
    assert!(
        count(
            r#"callbackd_store_call_duration_seconds_sum{namespace="default",call="runEvents.append",outcome="ok"}"#
        ) > 0.0
    );
    assert_eq!(
        count(
            r#"callbackd_store_call_duration_seconds_count{namespace="default",call="agents.update",outcome="not_found"}"#
        ),
        1.0
    );
    assert_eq!(
        count(
            r#"callbackd_store_call_duration_seconds_count{namespace="default",call="(undecoded)",outcome="invalid_argument"}"#
        ),
        1.0
    );
    assert_eq!(
        count(
            r#"callbackd_store_call_duration_seconds_count{namespace="default",call="agents.get",outcome="invalid_argument"}"#
        ),
        1.0
    );
    assert_eq!(count("callbackd_events_appended_total"), 6.0);
    assert_eq!(
        count(
            r#"callbackd_tool_call_duration_seconds_count{namespace="default",tool="echo",outcome="ok"}"#
        ),
        1.0
    );
    assert_eq!(
        count(
            r#"callbackd_tool_call_duration_seconds_count{namespace="default",tool="(unknown)",outcome="not_found"}"#
        ),
        1.0
    );
    assert!(
        !text.contains("no-such-tool-7f3a"),
        "a made-up tool name got a series"
    );
    assert!(count("callbackd_database_size_bytes") >= 4096.0);
    assert!(sample(&text, "callbackd_wal_size_bytes").is_some());
    assert_eq!(count("callbackd_streams_open"), 0.0);
    assert_eq!(count("callbackd_stream_followers"), 0.0);
    assert_eq!(count("callbackd_retention_removed_total"), 0.0);
}

#[tokio::test]
async fn the_metrics_token_is_required_and_the_bridge_tokens_are_refused() {
    let app =
        TestApp::spawn_with(|c| c.metrics.token = Some(Secret::new("scrape-me".into()))).await;
    for auth in [
        None,
        Some("wrong"),
        Some(app.store_token.as_str()),
        Some(app.tool_token.as_str()),
    ] {
        let resp = scrape(&app, auth).await;
        assert_eq!(resp.status, 401, "{auth:?}");
        assert_eq!(resp.code(), "unauthenticated");
        assert!(
            resp.message().contains("metrics token"),
            "{}",
            resp.message()
        );
    }
    let resp = scrape(&app, Some("scrape-me")).await;
    assert_eq!(resp.status, 200);
    assert!(resp.text().contains("callbackd_events_appended_total 0"));
    let post = app
        .request("POST", "/metrics", &[], "", Framing::ContentLength)
        .await;
    assert_eq!(post.status, 405);
}

#[tokio::test]
async fn a_metrics_token_equal_to_a_bridge_token_is_a_startup_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = callbackd::Config::default();
    config.server.listen = "127.0.0.1:0".into();
    config.store.path = dir.path().join("m.db");
    config.auth.store_token = Some(Secret::new("same-token".into()));
    config.auth.tool_token = Some(Secret::new("tool-token".into()));
    config.metrics.token = Some(Secret::new("same-token".into()));
    let err = callbackd::App::build(config).await.err().expect("refused");
    assert!(
        format!("{err:#}").contains("metrics.token must differ"),
        "{err:#}"
    );
}

/// Runs are counted when the bridge stores their end (the run document's terminal status,
/// which the store announces), by status, with the time from their start (the `request`
/// event) to their end; tokens from their `usage` events. On every backend: each announces a
/// run's end once.
#[tokio::test]
async fn runs_are_counted_by_status_from_the_events_the_bridge_stores() {
    let app = TestApp::spawn().await;
    let a1 = agent("a1", "/ws", 1_780_000_000_000);
    app.store_ok("agents", "create", json!({ "agent": a1 }))
        .await;
    for (turn, run) in [(1, "r1"), (2, "r2")] {
        let doc = crate::helpers::run("a1", run, turn);
        app.store_ok("runs", "create", json!({ "run": doc })).await;
    }
    let end = |run: &'static str, turn: i64, status: &'static str| {
        let app = &app;
        async move {
            let mut doc = crate::helpers::run("a1", run, turn);
            doc["status"] = json!(status);
            app.store_ok("runs", "update", json!({ "run": doc })).await;
            // Written again (the bridge adds its usage): not a second end.
            app.store_ok("runs", "update", json!({ "run": doc })).await;
        }
    };
    let append = |run: &'static str, message: serde_json::Value| {
        let app = &app;
        async move {
            app.store_ok(
                "runEvents",
                "append",
                json!({"runId": run, "eventType": "sdk_message",
                       "payload": {"type": "sdk_message", "message": message}}),
            )
            .await;
        }
    };
    for run in ["r1", "r2"] {
        append(run, json!({"type": "request"})).await;
        append(run, json!({"type": "status", "status": "RUNNING"})).await;
    }
    append(
        "r1",
        json!({"type": "usage", "usage": {"inputTokens": 20, "outputTokens": 7,
               "cacheReadTokens": 0, "cacheWriteTokens": 3, "totalTokens": 30}}),
    )
    .await;
    append(
        "r2",
        json!({"type": "usage", "usage": {"inputTokens": 5, "outputTokens": 1}}),
    )
    .await;
    append("r1", json!({"type": "status", "status": "FINISHED"})).await;
    end("r1", 1, "finished").await;
    append("r2", json!({"type": "status", "status": "ERROR"})).await;
    end("r2", 2, "error").await;
    let text = scrape(&app, None).await.text();
    let count = |series: &str| sample(&text, series).unwrap_or_else(|| panic!("{series}\n{text}"));
    assert_eq!(
        count(r#"callbackd_runs_total{namespace="default",status="finished"}"#),
        1.0
    );
    assert_eq!(
        count(r#"callbackd_runs_total{namespace="default",status="error"}"#),
        1.0
    );
    assert!(
        !text.contains(r#"status="running""#),
        "a running run is not an ended one\n{text}"
    );
    assert_eq!(
        count(r#"callbackd_run_duration_seconds_count{namespace="default"}"#),
        2.0
    );
    // Tokens by kind, summed over the runs' usage events (totalTokens is not a kind).
    for (kind, n) in [
        ("input", 25.0),
        ("output", 8.0),
        ("cache_read", 0.0),
        ("cache_write", 3.0),
    ] {
        assert_eq!(
            count(&format!(
                r#"callbackd_tokens_total{{namespace="default",kind="{kind}"}}"#
            )),
            n
        );
    }
    assert!(!text.contains("kind=\"total\""), "{text}");
    assert_eq!(tool(&app, "echo").await.status, 200);
    let text = scrape(&app, None).await.text();
    assert_eq!(
        sample(
            &text,
            r#"callbackd_tool_calls_total{namespace="default",tool="echo",outcome="ok"}"#
        ),
        Some(1.0),
        "{text}"
    );
}
