//! Namespaces (issue 12, docs/namespaces.md) on the real server, on both backends: isolation
//! of store calls, tools and the run API; equal ids apart; quotas; token rotation by reload.

use std::time::{Duration, Instant};

use callbackd::namespaces::NamespaceConfig;
use callbackd::secret::Secret;
use callbackd::Config;
use serde_json::{json, Value};

use crate::helpers::{agent, run, Framing, Resp, TestApp, TOOL_PATH};
use crate::sse::Frame;

const T: Duration = Duration::from_secs(10);

/// One namespace's four tokens, made up by the test.
#[derive(Clone)]
struct Tokens {
    store: String,
    tool: String,
    api: String,
    read: String,
}

impl Tokens {
    fn new(ns: &str, version: u32) -> Tokens {
        let t = |role: &str| format!("{ns}-{role}-token-v{version}-0123456789abcdef");
        Tokens {
            store: t("store"),
            tool: t("tool"),
            api: t("api"),
            read: t("read"),
        }
    }
}

fn entry(name: &str, t: &Tokens) -> NamespaceConfig {
    NamespaceConfig {
        name: name.into(),
        store_token: Some(Secret::new(t.store.clone())),
        tool_token: Some(Secret::new(t.tool.clone())),
        api_token: Some(Secret::new(t.api.clone())),
        api_read_token: Some(Secret::new(t.read.clone())),
        ..Default::default()
    }
}

/// Makes `app`'s requests those of namespace `t` (the helpers use these fields).
fn act_as(app: &mut TestApp, t: &Tokens) {
    app.store_token = t.store.clone();
    app.tool_token = t.tool.clone();
    app.api_token = t.api.clone();
    app.api_read_token = t.read.clone();
}

fn own(app: &TestApp) -> Tokens {
    Tokens {
        store: app.store_token.clone(),
        tool: app.tool_token.clone(),
        api: app.api_token.clone(),
        read: app.api_read_token.clone(),
    }
}

async fn tool(app: &TestApp, name: &str, args: Value) -> Resp {
    let auth = format!("Bearer {}", app.tool_token);
    app.request(
        "POST",
        TOOL_PATH,
        &[
            ("content-type", "application/json"),
            ("connect-protocol-version", "1"),
            ("authorization", &auth),
        ],
        json!({"toolName": name, "args": args, "toolCallId": "t1", "agentId": "shared"})
            .to_string(),
        Framing::Chunked,
    )
    .await
}

/// Everything a namespace's bridge can read of its data, as JSON text: compared before and
/// after another namespace's forgeries.
async fn snapshot(app: &TestApp, agents: &[&str], runs: &[&str], blobs: &[(&str, &str)]) -> String {
    let mut out = vec![
        app.store_ok("agents", "list", json!({"filter": {}})).await,
        app.store_ok("runs", "list", json!({"filter": {}})).await,
    ];
    for a in agents {
        out.push(app.store_ok("agents", "get", json!({"agentId": a})).await);
    }
    for r in runs {
        out.push(app.store_ok("runEvents", "list", json!({"runId": r})).await);
    }
    for (a, b) in blobs {
        out.push(
            app.store_ok("checkpoints", "get", json!({"agentId": a, "blobId": b}))
                .await,
        );
    }
    serde_json::to_string(&out).unwrap()
}

async fn fill(app: &TestApp, agent_id: &str, cwd: &str, run_id: &str, events: usize) {
    app.store_ok(
        "agents",
        "create",
        json!({"agent": agent(agent_id, cwd, 1_780_000_000_000)}),
    )
    .await;
    let mut r = run(agent_id, run_id, 1);
    r["status"] = json!("running");
    app.store_ok("runs", "create", json!({"run": r})).await;
    for i in 0..events {
        app.store_ok(
            "runEvents",
            "append",
            json!({"runId": run_id, "eventType": "run_stream_event", "payload": {"cwd": cwd, "i": i}}),
        )
        .await;
    }
}

#[tokio::test]
async fn namespaces_see_only_their_own_data_and_equal_ids_stay_apart() {
    let (a, b) = (Tokens::new("a", 1), Tokens::new("b", 1));
    let (ca, cb) = (entry("a", &a), entry("b", &b));
    let mut app = TestApp::spawn_with(move |c| c.namespaces = vec![ca, cb]).await;
    let default = own(&app);

    // The same agent and run ids in a and b, and data only b has.
    act_as(&mut app, &a);
    fill(&app, "same", "/a", "run-same", 2).await;
    act_as(&mut app, &b);
    fill(&app, "same", "/b", "run-same", 1).await;
    fill(&app, "only-b", "/b", "run-only-b", 3).await;
    app.store_ok(
        "checkpoints",
        "create",
        json!({"agentId": "only-b", "blobId": "blob-b", "data": "YmJi"}),
    )
    .await;
    let before = snapshot(
        &app,
        &["same", "only-b"],
        &["run-same", "run-only-b"],
        &[("only-b", "blob-b")],
    )
    .await;

    // Equal ids stay apart.
    act_as(&mut app, &a);
    let got = app
        .store_ok("agents", "get", json!({"agentId": "same"}))
        .await;
    assert_eq!(got.unwrap()["cwd"], "/a");
    let events = app
        .store_ok("runEvents", "list", json!({"runId": "run-same"}))
        .await
        .unwrap();
    assert_eq!(events["items"].as_array().unwrap().len(), 2, "{events}");
    let list = app
        .store_ok("agents", "list", json!({"filter": {}}))
        .await
        .unwrap();
    let ids: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["agentId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["same"], "a lists only its own agents");

    // Forgeries with a's tokens aimed at b's ids find nothing and change nothing.
    assert_eq!(
        app.store_ok("agents", "get", json!({"agentId": "only-b"}))
            .await,
        None
    );
    let (code, _) = app
        .store_err(
            "agents",
            "update",
            json!({"agent": agent("only-b", "/evil", 1_790_000_000_000)}),
        )
        .await;
    assert_eq!(code, "not_found");
    app.store_ok("agents", "delete", json!({"filter": {"agentId": "only-b"}}))
        .await;
    app.store_ok("runs", "delete", json!({"filter": {"agentId": "only-b"}}))
        .await;
    app.store_ok(
        "runEvents",
        "delete",
        json!({"filter": {"runIds": ["run-only-b"]}}),
    )
    .await;
    app.store_ok(
        "checkpoints",
        "delete",
        json!({"filter": {"agentId": "only-b"}}),
    )
    .await;
    let none = app
        .store_ok("runEvents", "list", json!({"runId": "run-only-b"}))
        .await
        .unwrap();
    assert_eq!(none["items"], json!([]));
    assert_eq!(
        app.store_ok(
            "checkpoints",
            "get",
            json!({"agentId": "only-b", "blobId": "blob-b"})
        )
        .await,
        Some(json!({"found": false}))
    );
    // Deleting a's own "same" leaves b's "same".
    app.store_ok("agents", "delete", json!({"filter": {"agentId": "same"}}))
        .await;

    // The run API: a's API token sees a's sessions only; b's ids answer as unknown ones.
    let sessions = app.api_get("/v1/sessions").await;
    assert_eq!(sessions.status, 200, "{}", sessions.text());
    assert_eq!(
        sessions.json()["sessions"],
        json!([]),
        "a's only agent was deleted"
    );
    for (path, unknown) in [
        ("/v1/sessions/only-b", "/v1/sessions/no-such-id"),
        ("/v1/sessions/only-b/runs", "/v1/sessions/no-such-id/runs"),
        ("/v1/runs/run-only-b", "/v1/runs/no-such-run"),
        ("/v1/runs/run-only-b/events", "/v1/runs/no-such-run/events"),
        ("/v1/runs/run-only-b/stream", "/v1/runs/no-such-run/stream"),
    ] {
        let forged = app.api_get(path).await;
        let missing = app.api_get(unknown).await;
        assert_eq!(forged.status, 404, "{path}: {}", forged.text());
        assert_eq!(forged.status, missing.status, "{path}");
        let scrub = |r: &Resp, id: &str| r.text().replace(id, "ID");
        let (fid, mid) = if path.contains("runs/") {
            ("run-only-b", "no-such-run")
        } else {
            ("only-b", "no-such-id")
        };
        assert_eq!(
            scrub(&forged, fid),
            scrub(&missing, mid),
            "{path}: no existence leak"
        );
    }
    let cancel = app
        .api("POST", "/v1/runs/run-only-b/cancel", Some(&a.api), "{}")
        .await;
    assert_eq!(cancel.status, 404, "{}", cancel.text());
    // The default namespace's tokens see none of it either.
    act_as(&mut app, &default);
    assert_eq!(
        app.store_ok("agents", "get", json!({"agentId": "same"}))
            .await,
        None
    );
    // b's data is as it was, byte for byte.
    act_as(&mut app, &b);
    let after = snapshot(
        &app,
        &["same", "only-b"],
        &["run-same", "run-only-b"],
        &[("only-b", "blob-b")],
    )
    .await;
    assert_eq!(before, after, "a's forgeries changed b's data");
    let stream = app.stream("run-only-b", None).await;
    assert_eq!(stream.status, 200, "b follows its own run");

    // Tokens are per service as well as per namespace.
    act_as(&mut app, &a);
    app.store_token = b.tool.clone();
    let (code, _) = app.store_err("agents", "list", json!({"filter": {}})).await;
    assert_eq!(code, "unauthenticated", "b's tool token is no store token");
    let wrong = app.api("GET", "/v1/sessions", Some(&a.store), "").await;
    assert_eq!(wrong.status, 401);

    // Metrics carry the namespace.
    let metrics = app
        .request("GET", "/metrics", &[], "", Framing::ContentLength)
        .await;
    let text = metrics.text();
    assert!(
        text.contains(r#"callbackd_store_call_duration_seconds_count{namespace="a",call="agents.get",outcome="ok"}"#),
        "{text}"
    );
    assert!(text.contains(r#"namespace="b",call="runEvents.append",outcome="ok""#));
}

#[tokio::test]
async fn a_tool_outside_the_allowlist_does_not_exist_for_that_namespace() {
    let a = Tokens::new("a", 1);
    let mut ca = entry("a", &a);
    ca.tools = Some(vec!["echo".into()]);
    let mut app = TestApp::spawn_with(move |c| c.namespaces = vec![ca]).await;
    let default = own(&app);
    act_as(&mut app, &a);
    let echo = tool(&app, "echo", json!({"x": 1})).await;
    assert_eq!(echo.status, 200, "{}", echo.text());
    let memory = tool(&app, "memory", json!({"action": "list"})).await;
    let unknown = tool(&app, "no-such-tool", json!({})).await;
    assert_eq!(memory.code(), "not_found", "{}", memory.text());
    assert_eq!(
        memory.message().replace("memory", "X"),
        unknown.message().replace("no-such-tool", "X"),
        "the same answer as for a tool that does not exist"
    );
    assert!(
        !memory.message().contains("word_count"),
        "{}",
        memory.message()
    );
    act_as(&mut app, &default);
    let memory = tool(&app, "memory", json!({"action": "list"})).await;
    assert_eq!(memory.status, 200, "the default namespace has every tool");

    // An allowlist naming an unknown tool is a startup error naming the namespace.
    let mut bad = entry("b", &Tokens::new("b", 1));
    bad.tools = Some(vec!["nope".into()]);
    let mut config = Config::default();
    config.server.listen = "127.0.0.1:0".into();
    config.store.path = app.dir.path().join("other.db");
    config.namespaces = vec![bad];
    let err = callbackd::App::build(config)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("namespaces[b].tools") && err.contains("nope"),
        "{err}"
    );
}

#[tokio::test]
async fn quotas_stop_one_namespace_and_not_the_other() {
    let (a, b, r) = (
        Tokens::new("a", 1),
        Tokens::new("b", 1),
        Tokens::new("r", 1),
    );
    let mut ca = entry("a", &a);
    ca.quotas.max_agents = Some(2);
    ca.quotas.max_events_per_run = Some(3);
    ca.quotas.max_stored_bytes = Some(20_000);
    let cb = entry("b", &b);
    let mut cr = entry("r", &r);
    cr.quotas.max_appends_per_second = Some(5);
    cr.quotas.over_rate = callbackd::namespaces::OverRate::Refuse;
    let mut app = TestApp::spawn_with(move |c| c.namespaces = vec![ca, cb, cr]).await;

    // max_agents
    act_as(&mut app, &a);
    for id in ["a1", "a2"] {
        app.store_ok("agents", "create", json!({"agent": agent(id, "/a", 1)}))
            .await;
    }
    let (code, msg) = app
        .store_err("agents", "create", json!({"agent": agent("a3", "/a", 1)}))
        .await;
    assert_eq!(code, "resource_exhausted");
    assert!(
        msg.contains("namespace a") && msg.contains("max_agents"),
        "{msg}"
    );
    assert_eq!(
        app.store_ok("agents", "get", json!({"agentId": "a3"}))
            .await,
        None,
        "nothing was written"
    );
    act_as(&mut app, &b);
    for id in ["a1", "a2", "a3"] {
        app.store_ok("agents", "create", json!({"agent": agent(id, "/b", 1)}))
            .await;
    }

    // max_events_per_run: exact, per run, and the refused append leaves no hole.
    act_as(&mut app, &a);
    let append = |i: usize| json!({"runId": "ra", "eventType": "e", "payload": {"i": i}});
    for i in 0..3 {
        app.store_ok("runEvents", "append", append(i)).await;
    }
    let (code, msg) = app.store_err("runEvents", "append", append(3)).await;
    assert_eq!(code, "resource_exhausted");
    assert!(
        msg.contains("max_events_per_run") && msg.contains("ra"),
        "{msg}"
    );
    let events = app
        .store_ok("runEvents", "list", json!({"runId": "ra"}))
        .await
        .unwrap();
    assert_eq!(events["items"].as_array().unwrap().len(), 3);
    app.store_ok(
        "runEvents",
        "append",
        json!({"runId": "rb", "eventType": "e"}),
    )
    .await;
    act_as(&mut app, &b);
    for i in 0..5 {
        app.store_ok("runEvents", "append", append(i)).await;
    }

    // max_stored_bytes: a write that would cross it is refused; b is unaffected.
    act_as(&mut app, &a);
    app.store_ok("agents", "delete", json!({"filter": {"agentId": "a2"}}))
        .await;
    let mut big = agent("a2", "/a", 1);
    big["notes"] = json!("x".repeat(25_000));
    let (code, msg) = app
        .store_err("agents", "create", json!({"agent": big.clone()}))
        .await;
    assert_eq!(code, "resource_exhausted");
    assert!(msg.contains("max_stored_bytes"), "{msg}");
    act_as(&mut app, &b);
    big["agentId"] = json!("b-big");
    app.store_ok("agents", "create", json!({"agent": big}))
        .await;

    // max_appends_per_second with over_rate = refuse: about a second's worth gets through.
    act_as(&mut app, &r);
    let started = Instant::now();
    let (mut ok, mut refused) = (0u32, 0u32);
    for i in 0..30 {
        let resp = app
            .call_store(
                "runEvents",
                "append",
                json!({"runId": "rr", "eventType": "e", "payload": {"i": i}}),
            )
            .await;
        match resp.status {
            200 => ok += 1,
            _ => {
                assert_eq!(resp.code(), "resource_exhausted", "{}", resp.text());
                assert!(resp.message().contains("max_appends_per_second"));
                refused += 1;
            }
        }
    }
    let allowed = 5 + (started.elapsed().as_secs_f64() * 5.0).ceil() as u32;
    assert!(refused > 0, "30 appends at once, at 5 a second");
    assert!(
        ok >= 5 && ok <= allowed,
        "{ok} appended, at most {allowed} allowed"
    );

    // Usage and refusals are visible.
    let text = app
        .request("GET", "/metrics", &[], "", Framing::ContentLength)
        .await
        .text();
    for quota in ["max_agents", "max_events_per_run", "max_stored_bytes"] {
        assert!(
            text.contains(&format!(
                r#"callbackd_quota_refusals_total{{namespace="a",quota="{quota}"}} 1"#
            )),
            "{quota}: {text}"
        );
    }
    assert!(text.contains(
        r#"callbackd_quota_refusals_total{namespace="r",quota="max_appends_per_second"}"#
    ));
    assert!(!text.contains(r#"quota_refusals_total{namespace="b""#));
}

#[tokio::test]
async fn a_reload_rotates_tokens_and_closes_revoked_streams_without_a_restart() {
    let (a1, b) = (Tokens::new("a", 1), Tokens::new("b", 1));
    let a2 = Tokens::new("a", 2);
    let (ca, cb) = (entry("a", &a1), entry("b", &b));
    let mut app = TestApp::spawn_with(move |c| c.namespaces = vec![ca, cb]).await;
    let default = own(&app);
    act_as(&mut app, &a1);
    fill(&app, "agent-a", "/a", "run-a", 1).await;
    act_as(&mut app, &b);
    fill(&app, "agent-b", "/b", "run-b", 1).await;
    // A stream of a's live run, opened with a's old API token.
    act_as(&mut app, &a1);
    let mut stream = app.stream("run-a", None).await;
    assert_eq!(stream.status, 200);
    let first = stream.next(T).await.expect("the stored event");
    assert!(
        matches!(first, Frame::Event { id: Some(1), .. }),
        "{first:?}"
    );
    let caught_up = stream.next(T).await.expect("up_to_date");
    assert_eq!(caught_up.kind(), "up_to_date");

    // The configuration as it is now: a's tokens rotated, b removed.
    let mut config = Config::default();
    config.server.listen = "127.0.0.1:0".into();
    config.store.path = app.db.clone();
    if let Some(pg) = &app.pg {
        pg.apply(&mut config);
    }
    config.namespaces = vec![entry("a", &a2)];
    // An invalid one first: refused whole, the old tokens stay in force.
    let mut invalid = config.clone();
    let mut clash = entry("c", &Tokens::new("c", 1));
    clash.tool_token = Some(Secret::new(a2.store.clone()));
    invalid.namespaces.push(clash);
    let err = app.reloader.apply(&invalid).unwrap_err().to_string();
    assert!(
        err.contains("namespaces[c].tool_token") && err.contains("namespaces[a].store_token"),
        "{err}"
    );
    assert_eq!(
        app.api("GET", "/v1/sessions", Some(&a1.api), "")
            .await
            .status,
        200
    );

    app.reloader.apply(&config).expect("reload");
    // Old tokens refused at once, new ones accepted, the data still there.
    let old = app.api("GET", "/v1/sessions", Some(&a1.api), "").await;
    assert_eq!(old.status, 401, "{}", old.text());
    let new = app.api("GET", "/v1/sessions", Some(&a2.api), "").await;
    assert_eq!(new.status, 200, "{}", new.text());
    assert_eq!(
        new.json()["sessions"][0]["session_id"],
        "agent-a",
        "{}",
        new.text()
    );
    let (code, _) = app.store_err("agents", "list", json!({"filter": {}})).await;
    assert_eq!(code, "unauthenticated", "a's old store token");
    act_as(&mut app, &a2);
    let got = app
        .store_ok("agents", "get", json!({"agentId": "agent-a"}))
        .await;
    assert!(got.is_some(), "a's data is kept across the rotation");
    // b was removed: its tokens are refused everywhere; its data stays in the store.
    act_as(&mut app, &b);
    let (code, _) = app.store_err("agents", "list", json!({"filter": {}})).await;
    assert_eq!(code, "unauthenticated");
    assert_eq!(tool(&app, "echo", json!({})).await.status, 401);
    // The stream opened with a's old token was closed (keepalives aside, nothing more).
    loop {
        match stream.next(T).await {
            None => break,
            Some(Frame::Comment(_)) => {}
            Some(other) => panic!("unexpected frame after revocation: {other:?}"),
        }
    }
    // The default namespace, whose tokens did not change, works on.
    app.store_token = default.store.clone();
    app.store_ok("agents", "list", json!({"filter": {}})).await;
    // A reload never generates default tokens: with the tokens file gone it is refused, and
    // the running bridge's tokens stay valid.
    std::fs::remove_file(callbackd::tokens::generated_path(&app.db)).unwrap();
    let err = app.reloader.apply(&config).unwrap_err().to_string();
    assert!(err.contains("no tokens file"), "{err}");
    app.store_ok("agents", "list", json!({"filter": {}})).await;
}

#[tokio::test]
async fn concurrent_creates_and_appends_stop_exactly_at_their_quotas_and_delayed_appends_keep_the_rate(
) {
    let (a, d) = (Tokens::new("a", 1), Tokens::new("d", 1));
    let mut ca = entry("a", &a);
    ca.quotas.max_agents = Some(3);
    ca.quotas.max_events_per_run = Some(5);
    let mut cd = entry("d", &d);
    cd.quotas.max_appends_per_second = Some(20);
    let mut app = TestApp::spawn_with(move |c| c.namespaces = vec![ca, cd]).await;
    act_as(&mut app, &a);
    let creates = (0..10).map(|i| {
        app.call_store(
            "agents",
            "create",
            json!({"agent": agent(&format!("c{i}"), "/a", 1)}),
        )
    });
    let answers = futures_util::future::join_all(creates).await;
    let ok = answers.iter().filter(|r| r.status == 200).count();
    assert_eq!(ok, 3, "exactly max_agents of 10 concurrent creates");
    assert!(answers
        .iter()
        .filter(|r| r.status != 200)
        .all(|r| r.code() == "resource_exhausted"));
    let list = app
        .store_ok("agents", "list", json!({"filter": {}}))
        .await
        .unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 3);

    // max_events_per_run under concurrent appends (on PostgreSQL they share transactions):
    // exactly the quota is written per run, gap-free, every other append refused.
    let appends = (0..24).map(|i| {
        app.call_store(
            "runEvents",
            "append",
            json!({"runId": format!("q{}", i % 2), "eventType": "e", "payload": {"i": i}}),
        )
    });
    let answers = futures_util::future::join_all(appends).await;
    assert_eq!(answers.iter().filter(|r| r.status == 200).count(), 10);
    assert!(answers
        .iter()
        .filter(|r| r.status != 200)
        .all(|r| r.code() == "resource_exhausted"));
    for run in ["q0", "q1"] {
        let events = app
            .store_ok("runEvents", "list", json!({"runId": run}))
            .await
            .unwrap();
        let seqs: Vec<u64> = events["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5], "run {run}");
    }

    // over_rate = "delay" (the default): every append gets through, at the rate.
    act_as(&mut app, &d);
    let started = Instant::now();
    for i in 0..40 {
        app.store_ok(
            "runEvents",
            "append",
            json!({"runId": "rd", "eventType": "e", "payload": {"i": i}}),
        )
        .await;
    }
    // 20 from the full bucket, 20 more at 20 a second: at least ~1 s, never less.
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "40 appends at 20/s took {:?}",
        started.elapsed()
    );
}
