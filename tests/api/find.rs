//! Issue 21, sessions you can manage and find, and usage over time, against the real server
//! on the configured backend (SQLite, or PostgreSQL with `CALLBACKD_TEST_BACKEND=postgres`):
//! `PATCH`/`DELETE /v1/sessions/{id}` without a bridge (the store's cascade), the
//! `q`/`status` filters of `GET /v1/sessions`, the cross-session `GET /v1/runs` with keyset
//! paging, and `GET /v1/usage` adding up to the runs' usage.

use serde_json::{json, Value};

use crate::helpers::{agent, run, TestApp};

const DAY: i64 = 86_400_000;
/// 2026-12-01T00:00:00Z.
const DEC1: i64 = 1_796_083_200_000;

async fn session(app: &TestApp, id: &str, name: &str, updated_at: i64) {
    let mut a = agent(id, "/ws", updated_at);
    a["name"] = json!(name);
    app.store_ok("agents", "create", json!({"agent": a})).await;
}

/// A run of `agent` created at `created`, with `status`, `usage` and `result`.
#[allow(clippy::too_many_arguments)]
async fn a_run(
    app: &TestApp,
    agent: &str,
    id: &str,
    turn: i64,
    created: i64,
    status: &str,
    usage: Value,
    result: Value,
) {
    let mut r = run(agent, id, turn);
    r["createdAt"] = json!(created);
    r["status"] = json!(status);
    r["usage"] = usage;
    r["result"] = result;
    app.store_ok("runs", "create", json!({"run": r})).await;
}

fn ids(page: &Value, list: &str, key: &str) -> Vec<String> {
    page[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} in {page}"))
        .iter()
        .map(|s| s[key].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_session_is_renamed_found_by_q_and_status_and_deleted_with_everything_of_it() {
    let app = TestApp::spawn().await;
    session(&app, "a1", "New Agent", 1_780_000_000_001).await;
    session(&app, "a2", "New Agent", 1_780_000_000_002).await;
    a_run(
        &app,
        "a1",
        "r1",
        1,
        DEC1,
        "finished",
        Value::Null,
        Value::Null,
    )
    .await;
    app.exec(
        "INSERT INTO memory_notes (ns, agent_id, key, value, updated_at) VALUES ('default', 'a1', 'k', 'v', 1)",
        "INSERT INTO memory_notes (ns, agent_id, key, value, updated_at) VALUES ('default', 'a1', 'k', 'v', 1)",
    )
    .await;

    let token = app.api_token.clone();
    let r = app
        .api(
            "PATCH",
            "/v1/sessions/a1",
            Some(&token),
            r#"{"name": "Q3 deploy plan"}"#,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["name"], "Q3 deploy plan");
    assert_eq!(
        app.api_get("/v1/sessions/a1").await.json()["name"],
        "Q3 deploy plan"
    );
    // Only the name changed: the document keeps its other keys (the bridge spreads it).
    let doc = app
        .store_ok("agents", "get", json!({"agentId": "a1"}))
        .await
        .unwrap();
    assert_eq!(doc["sdkMetadata"]["blobEncryptionKey"], "00ff".repeat(16));
    assert_eq!(doc["updatedAt"], 1_780_000_000_001i64);

    // q: case-insensitive, anywhere in the name; LIKE's own characters are literal.
    let found = app.api_get("/v1/sessions?q=DEPLOY").await;
    assert_eq!(found.status, 200, "{}", found.text());
    assert_eq!(ids(&found.json(), "sessions", "session_id"), ["a1"]);
    assert_eq!(
        ids(
            &app.api_get("/v1/sessions?q=new%20agent").await.json(),
            "sessions",
            "session_id"
        ),
        ["a2"]
    );
    assert_eq!(
        ids(
            &app.api_get("/v1/sessions?q=%25").await.json(),
            "sessions",
            "session_id"
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        ids(
            &app.api_get("/v1/sessions?status=idle").await.json(),
            "sessions",
            "session_id"
        ),
        ["a2", "a1"]
    );
    assert_eq!(
        ids(
            &app.api_get("/v1/sessions?status=archived").await.json(),
            "sessions",
            "session_id"
        ),
        Vec::<String>::new()
    );
    // Paged: one at a time, the cursor continues.
    let p1 = app.api_get("/v1/sessions?status=idle&limit=1").await.json();
    assert_eq!(ids(&p1, "sessions", "session_id"), ["a2"]);
    let next = p1["next_cursor"].as_str().unwrap();
    let p2 = app
        .api_get(&format!("/v1/sessions?status=idle&limit=1&cursor={next}"))
        .await
        .json();
    assert_eq!(ids(&p2, "sessions", "session_id"), ["a1"]);
    assert_eq!(p2["next_cursor"], Value::Null);

    // No bridge attached: the store's cascade deletes it and every row of it.
    let r = app.api("DELETE", "/v1/sessions/a1", Some(&token), "").await;
    assert_eq!(r.status, 204, "{}", r.text());
    assert_eq!(app.api_get("/v1/sessions/a1").await.status, 404);
    assert_eq!(app.api_get("/v1/runs/r1").await.status, 404);
    assert_eq!(app.count("SELECT COUNT(*) FROM memory_notes").await, 0);
    assert_eq!(
        ids(
            &app.api_get("/v1/sessions?q=deploy").await.json(),
            "sessions",
            "session_id"
        ),
        Vec::<String>::new()
    );
    let again = app.api("DELETE", "/v1/sessions/a1", Some(&token), "").await;
    assert_eq!(again.status, 404, "{}", again.text());
    assert!(
        again.json()["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("no session \"a1\""),
        "{}",
        again.text()
    );
}

#[tokio::test]
async fn bad_names_filters_and_read_only_tokens_are_refused_saying_why() {
    let app = TestApp::spawn().await;
    session(&app, "a1", "New Agent", 1_780_000_000_001).await;
    let token = app.api_token.clone();
    for (body, why) in [
        (r#"{"name": ""}"#.to_string(), "name must not be empty"),
        (r#"{"name": 7}"#.to_string(), "name must be a string"),
        (json!({"name": "x".repeat(201)}).to_string(), "at most 200"),
        (r#"{"title": "x"}"#.to_string(), "unknown field \"title\""),
    ] {
        let r = app
            .api("PATCH", "/v1/sessions/a1", Some(&token), &body)
            .await;
        assert_eq!(r.status, 400, "{body}: {}", r.text());
        assert!(
            r.json()["detail"]
                .as_str()
                .unwrap_or_default()
                .contains(why),
            "{body}: {}",
            r.text()
        );
    }
    let r = app
        .api(
            "PATCH",
            "/v1/sessions/nope",
            Some(&token),
            r#"{"name": "x"}"#,
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.text());

    let read = app.api_read_token.clone();
    let r = app
        .api("PATCH", "/v1/sessions/a1", Some(&read), r#"{"name": "x"}"#)
        .await;
    assert_eq!(r.status, 403, "{}", r.text());
    let r = app.api("DELETE", "/v1/sessions/a1", Some(&read), "").await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(
        app.api_get("/v1/sessions/a1").await.json()["name"],
        "New Agent"
    );

    for (path, why) in [
        (
            "/v1/runs?status=done",
            "is not one of queued, running, finished",
        ),
        (
            "/v1/runs?since=yesterday",
            "since \"yesterday\" is not a time",
        ),
        ("/v1/runs?until=2026-02-30", "is not a time"),
        ("/v1/runs?cursor=xyz", "cursor is not a cursor"),
        (
            "/v1/sessions?status=busy",
            "is not one of idle, running, error, archived",
        ),
        (
            "/v1/usage?group_by=week",
            "group_by \"week\" is not one of day, session",
        ),
        (
            "/v1/usage?since=2020-01-01&until=2026-01-01",
            "longer than 366 days",
        ),
    ] {
        let r = app.api_get(path).await;
        assert_eq!(r.status, 400, "{path}: {}", r.text());
        assert!(
            r.json()["detail"]
                .as_str()
                .unwrap_or_default()
                .contains(why),
            "{path}: {}",
            r.text()
        );
    }
}

#[tokio::test]
async fn a_session_with_a_run_in_progress_is_not_deleted() {
    let app = TestApp::spawn().await;
    let mut a = agent("a1", "/ws", 1_780_000_000_001);
    a["activeRunId"] = json!("r1");
    app.store_ok("agents", "create", json!({"agent": a})).await;
    a_run(
        &app,
        "a1",
        "r1",
        1,
        DEC1,
        "running",
        Value::Null,
        Value::Null,
    )
    .await;
    let token = app.api_token.clone();
    let r = app.api("DELETE", "/v1/sessions/a1", Some(&token), "").await;
    assert_eq!(r.status, 409, "{}", r.text());
    assert!(
        r.json()["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("POST /v1/runs/r1/cancel"),
        "{}",
        r.text()
    );
    assert_eq!(app.api_get("/v1/sessions/a1").await.status, 200);

    // A queued first run that never started (the session was never messaged) is no run in
    // progress: the session goes.
    let mut b = agent("b1", "/ws", 1_780_000_000_002);
    b["activeRunId"] = json!("q1");
    app.store_ok("agents", "create", json!({"agent": b})).await;
    a_run(
        &app,
        "b1",
        "q1",
        1,
        DEC1,
        "queued",
        Value::Null,
        Value::Null,
    )
    .await;
    let r = app.api("DELETE", "/v1/sessions/b1", Some(&token), "").await;
    assert_eq!(r.status, 204, "{}", r.text());
    assert_eq!(app.api_get("/v1/sessions/b1").await.status, 404);
}

#[tokio::test]
async fn runs_are_found_across_sessions_newest_first_paged_and_usage_adds_up() {
    let app = TestApp::spawn().await;
    session(&app, "a1", "billing bot", 1_780_000_000_001).await;
    session(&app, "a2", "New Agent", 1_780_000_000_002).await;
    let u = |i: u64, o: u64, cr: u64, cw: u64| json!({"inputTokens": i, "outputTokens": o, "cacheReadTokens": cr, "cacheWriteTokens": cw});
    // Two days: Dec 1 (r1, r2, r3) and Dec 2 (r4, r5); r5 has no usage yet.
    a_run(
        &app,
        "a1",
        "r1",
        1,
        DEC1 + 1_000,
        "finished",
        u(100, 10, 5, 1),
        json!("the invoice is sent"),
    )
    .await;
    a_run(
        &app,
        "a2",
        "r2",
        1,
        DEC1 + 2_000,
        "error",
        u(50, 0, 0, 0),
        Value::Null,
    )
    .await;
    a_run(
        &app,
        "a1",
        "r3",
        2,
        DEC1 + 2_000,
        "finished",
        u(7, 3, 0, 2),
        json!("done"),
    )
    .await;
    a_run(
        &app,
        "a2",
        "r4",
        2,
        DEC1 + DAY + 5,
        "cancelled",
        u(1, 1, 1, 1),
        Value::Null,
    )
    .await;
    a_run(
        &app,
        "a2",
        "r5",
        3,
        DEC1 + DAY + 6,
        "running",
        Value::Null,
        Value::Null,
    )
    .await;
    app.exec(
        "INSERT INTO run_inputs (ns, run_id, text) VALUES ('default', 'r2', 'Refund the ORDER 42')",
        "INSERT INTO run_inputs (ns, run_id, text) VALUES ('default', 'r2', 'Refund the ORDER 42')",
    )
    .await;

    let all = app.api_get("/v1/runs").await;
    assert_eq!(all.status, 200, "{}", all.text());
    // Newest first; r2 and r3 share a createdAt, ordered by id descending.
    assert_eq!(
        ids(&all.json(), "runs", "run_id"),
        ["r5", "r4", "r3", "r2", "r1"]
    );
    assert_eq!(
        all.json()["runs"][3]["input"]["text"],
        "Refund the ORDER 42"
    );

    // Keyset pages of 2 cover every run once, across the tie.
    let mut seen = vec![];
    let mut path = "/v1/runs?limit=2".to_string();
    loop {
        let page = app.api_get(&path).await.json();
        seen.extend(ids(&page, "runs", "run_id"));
        match page["next_cursor"].as_str() {
            Some(c) => path = format!("/v1/runs?limit=2&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(seen, ["r5", "r4", "r3", "r2", "r1"]);

    let app = &app;
    let found = |q: &'static str| async move {
        ids(
            &app.api_get(&format!("/v1/runs?{q}")).await.json(),
            "runs",
            "run_id",
        )
    };
    assert_eq!(found("status=finished").await, ["r3", "r1"]);
    assert_eq!(found("status=error,cancelled").await, ["r4", "r2"]);
    assert_eq!(found("session_id=a1").await, ["r3", "r1"]);
    assert_eq!(found("since=2026-12-02").await, ["r5", "r4"]);
    assert_eq!(found("until=2026-12-01T00:00:02Z").await, ["r1"]);
    assert_eq!(
        found("since=2026-12-01&until=2026-12-02&session_id=a2").await,
        ["r2"]
    );
    // q: the input, the output, the session's name.
    assert_eq!(found("q=order%2042").await, ["r2"]);
    assert_eq!(found("q=INVOICE").await, ["r1"]);
    assert_eq!(found("q=billing").await, ["r3", "r1"]);
    assert_eq!(
        found("q=billing&status=finished&since=2026-12-01T00:00:01.500Z").await,
        ["r3"]
    );

    // Usage per day adds up to the runs' usage.
    let usage = app
        .api_get("/v1/usage?group_by=day&since=2026-11-30&until=2026-12-03")
        .await;
    assert_eq!(usage.status, 200, "{}", usage.text());
    let usage = usage.json();
    assert_eq!(usage["groups"][0]["key"], "2026-12-01");
    assert_eq!(usage["groups"][0]["runs"], 3);
    assert_eq!(
        usage["groups"][0]["tokens"],
        json!({"input": 157, "output": 13, "cache_read": 5, "cache_write": 3})
    );
    assert_eq!(
        usage["groups"][0]["runs_by_status"],
        json!({"error": 1, "finished": 2})
    );
    assert_eq!(usage["groups"][1]["key"], "2026-12-02");
    assert_eq!(
        usage["groups"][1]["tokens"],
        json!({"input": 1, "output": 1, "cache_read": 1, "cache_write": 1})
    );
    assert_eq!(
        usage["groups"][1]["runs_by_status"],
        json!({"cancelled": 1, "running": 1})
    );
    assert_eq!(usage["groups"].as_array().unwrap().len(), 2);
    let mut sum = json!({"input": 0, "output": 0, "cache_read": 0, "cache_write": 0});
    for run in all.json()["runs"].as_array().unwrap() {
        for (k, key) in [
            ("input", "inputTokens"),
            ("output", "outputTokens"),
            ("cache_read", "cacheReadTokens"),
            ("cache_write", "cacheWriteTokens"),
        ] {
            sum[k] = json!(sum[k].as_u64().unwrap() + run["usage"][key].as_u64().unwrap_or(0));
        }
    }
    assert_eq!(
        usage["total"]["tokens"], sum,
        "the days add up to the runs' usage"
    );
    assert_eq!(usage["total"]["runs"], 5);

    let by_session = app
        .api_get("/v1/usage?group_by=session&since=2026-12-01&until=2026-12-03")
        .await
        .json();
    // Sessions by most tokens: a1 128, a2 54.
    assert_eq!(by_session["groups"][0]["key"], "a1");
    assert_eq!(by_session["groups"][0]["name"], "billing bot");
    assert_eq!(by_session["groups"][0]["runs"], 2);
    assert_eq!(by_session["groups"][1]["key"], "a2");
    assert_eq!(by_session["groups"][1]["tokens"]["input"], 51);

    // The window: until excludes, since includes.
    let one_day = app
        .api_get("/v1/usage?since=2026-12-02&until=2026-12-03")
        .await
        .json();
    assert_eq!(one_day["total"]["runs"], 2);
}

#[tokio::test]
async fn another_namespaces_session_is_not_found_and_a_deleted_one_gives_its_quota_back() {
    let t = crate::helpers::q_token;
    let q = crate::helpers::namespace_q(1);
    let mut app = TestApp::spawn_with(move |c| c.namespaces = vec![q]).await;
    let default_api = app.api_token.clone();
    app.store_token = t("store");
    app.api_token = t("api");
    session(&app, "a1", "mine", 1_780_000_000_001).await;
    let (code, msg) = app
        .store_err("agents", "create", json!({"agent": agent("a2", "/ws", 1)}))
        .await;
    assert_eq!(code, "resource_exhausted", "{msg}");
    assert!(msg.contains("delete an agent first"), "{msg}");

    let r = app
        .api("DELETE", "/v1/sessions/a1", Some(&default_api), "")
        .await;
    assert_eq!(r.status, 404, "another namespace's session: {}", r.text());
    let token = app.api_token.clone();
    let r = app.api("DELETE", "/v1/sessions/a1", Some(&token), "").await;
    assert_eq!(r.status, 204, "{}", r.text());
    app.store_ok("agents", "create", json!({"agent": agent("a2", "/ws", 1)}))
        .await;
}
