//! `callbackd follow / sessions / runs` (src/client) against the real daemon: the store is fed
//! through the bridge's own callback (CallStore), as the bridge would, and the client reads it
//! back through the run API, across a daemon restart on the same port.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use callbackd::client::{follow, ApiClient, FollowOptions, Followed, Sink};
use callbackd::secret::Secret;
use serde_json::{json, Value};

use crate::helpers::{agent, run, TestApp};

const TOKEN: &str = "client-test-api-token-0123456789abcdef";
const READ_TOKEN: &str = "client-test-read-token-0123456789abcdef";
const AGENT: &str = "agent-client-1";

fn with_tokens(c: &mut callbackd::Config) {
    c.api.token = Some(Secret::new(TOKEN.to_string()));
    c.api.read_token = Some(Secret::new(READ_TOKEN.to_string()));
}

async fn spawn() -> TestApp {
    TestApp::spawn_with(with_tokens).await
}

fn url(app: &TestApp) -> String {
    format!("http://{}/", app.addr)
}

/// An agent with one run, as the bridge creates them.
async fn session(app: &TestApp, run_id: &str) {
    app.store_ok("agents", "create", json!({"agent": agent(AGENT, "/ws", 1)}))
        .await;
    app.store_ok("runs", "create", json!({"run": run(AGENT, run_id, 1)}))
        .await;
}

/// One stored `sdk_message`, as the bridge appends it.
async fn sdk(app: &TestApp, run_id: &str, message: Value) -> u64 {
    let mut message = message;
    message["agent_id"] = json!(AGENT);
    message["run_id"] = json!(run_id);
    let ev = app
        .store_ok(
            "runEvents",
            "append",
            json!({"runId": run_id, "eventType": "run_stream_event", "payload": {
                "schemaVersion": 1, "type": "sdk_message", "agentId": AGENT, "runId": run_id,
                "message": message}}),
        )
        .await
        .expect("event");
    ev["seq"].as_u64().expect("seq")
}

async fn first_half(app: &TestApp, r: &str) {
    sdk(app, r, json!({"type": "request", "request_id": "q1"})).await;
    sdk(app, r, json!({"type": "status", "status": "RUNNING"})).await;
    sdk(app, r, json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "Calling echo."}]}})).await;
}

async fn second_half(app: &TestApp, r: &str, end: &str) {
    let args = json!({"providerIdentifier": "custom-user-tools", "toolName": "echo", "args": {"text": "ping"}});
    sdk(app, r, json!({"type": "tool_call", "call_id": "toolu_1", "name": "mcp", "status": "running", "args": args})).await;
    sdk(app, r, json!({"type": "tool_call", "call_id": "toolu_1", "name": "mcp", "status": "completed", "args": args,
        "result": {"status": "success", "value": {"content": [{"text": {"text": "{\"text\":\"ping\"}"}}]}}})).await;
    sdk(app, r, json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "Echo said ping."}]}})).await;
    sdk(app, r, json!({"type": "usage", "usage": {"inputTokens": 20, "outputTokens": 12, "cacheReadTokens": 0, "cacheWriteTokens": 0, "totalTokens": 32}})).await;
    let mut doc = run(AGENT, r, 1);
    match end {
        "FINISHED" => {
            sdk(app, r, json!({"type": "status", "status": "FINISHED"})).await;
            doc["status"] = json!("finished");
            doc["result"] = json!("Echo said ping.");
        }
        _ => {
            sdk(app, r, json!({"type": "status", "status": "ERROR", "message": "[internal] the backend went away"})).await;
            doc["status"] = json!("error");
            doc["error"] = json!("[internal] the backend went away");
        }
    }
    // The bridge's run document follows its terminal event.
    doc["endedAt"] = json!(1_780_000_000_500i64);
    app.store_ok("runs", "update", json!({"run": doc})).await;
}

/// Collects what `follow` hands on.
#[derive(Clone, Default)]
struct Collect {
    events: Arc<Mutex<Vec<(Value, bool)>>>,
    notes: Arc<Mutex<Vec<String>>>,
}

impl Sink for Collect {
    fn event(&mut self, event: &Value, durable: bool) -> std::io::Result<()> {
        self.events.lock().unwrap().push((event.clone(), durable));
        Ok(())
    }
    fn note(&mut self, text: &str) {
        self.notes.lock().unwrap().push(text.to_string());
    }
}

impl Collect {
    fn durable(&self) -> Vec<(u64, String)> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, d)| *d)
            .map(|(e, _)| {
                (
                    e["seq"].as_u64().unwrap(),
                    e["type"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }
}

async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..200 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn follow_resumes_across_a_daemon_restart_and_hands_on_every_event_once() {
    let app = spawn().await;
    let addr = app.addr;
    session(&app, "run-c1").await;
    first_half(&app, "run-c1").await;
    let client = ApiClient::new(&url(&app), TOKEN).unwrap();
    let sink = Collect::default();
    let mut s = sink.clone();
    let follower = tokio::spawn(async move {
        let opts = FollowOptions {
            max_backoff: Duration::from_millis(300),
            ..FollowOptions::default()
        };
        follow(&client, "run-c1", &opts, &mut s).await
    });
    eventually("the first three events", || sink.durable().len() == 3).await;

    // The daemon goes away in the middle of the run and comes back on the same port.
    let dir = app.stop().await;
    eventually("a reconnect note", || {
        !sink.notes.lock().unwrap().is_empty()
    })
    .await;
    let app = TestApp::spawn_in(dir, |c| {
        with_tokens(c);
        c.server.listen = addr.to_string();
    })
    .await;
    second_half(&app, "run-c1", "FINISHED").await;

    let (outcome, last) = tokio::time::timeout(Duration::from_secs(20), follower)
        .await
        .expect("follow ends with the run")
        .unwrap()
        .expect("follow succeeds");
    let Followed::Terminal(end) = outcome else {
        panic!("not terminal: {outcome:?}")
    };
    assert_eq!(end["type"], "completed");
    assert_eq!(end["status"], "finished");
    assert_eq!(last, 8);
    let types: Vec<(u64, String)> = sink.durable();
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
        ]
        .iter()
        .enumerate()
        .map(|(i, t)| (i as u64 + 1, t.to_string()))
        .collect::<Vec<_>>(),
        "every durable event exactly once, in order"
    );
    let notes = sink.notes.lock().unwrap().join("\n");
    assert!(notes.contains("resuming after event #3"), "{notes}");
}

#[tokio::test]
async fn follow_ends_on_204_and_refuses_bad_tokens_and_unknown_runs_without_retrying() {
    let app = spawn().await;
    finished_run(&app, "run-c2").await;
    let opts = FollowOptions {
        after: 8,
        ..FollowOptions::default()
    };
    let client = ApiClient::new(&url(&app), TOKEN).unwrap();
    let (outcome, _) = tokio::time::timeout(
        Duration::from_secs(10),
        follow(&client, "run-c2", &opts, &mut Collect::default()),
    )
    .await
    .expect("a terminal run with nothing after 8 answers at once")
    .unwrap();
    assert!(matches!(outcome, Followed::NothingMore), "{outcome:?}");

    let quick = Duration::from_secs(5);
    let wrong = ApiClient::new(&url(&app), "wrong-token-0123456789abcdef").unwrap();
    let err = tokio::time::timeout(
        quick,
        follow(
            &wrong,
            "run-c2",
            &FollowOptions::default(),
            &mut Collect::default(),
        ),
    )
    .await
    .expect("a 401 is not retried")
    .unwrap_err();
    assert!(err.to_string().contains("HTTP 401"), "{err}");
    let err = tokio::time::timeout(
        quick,
        follow(
            &client,
            "no-such-run",
            &FollowOptions::default(),
            &mut Collect::default(),
        ),
    )
    .await
    .expect("a 404 is not retried")
    .unwrap_err();
    assert!(err.to_string().contains("HTTP 404"), "{err}");
}

/// A session whose run `r` went through both halves and finished.
async fn finished_run(app: &TestApp, r: &str) {
    session(app, r).await;
    first_half(app, r).await;
    second_half(app, r, "FINISHED").await;
}

/// The binary itself, as a user runs it.
pub async fn cli(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_callbackd"))
        .args(args)
        .env_remove("CALLBACKD_API_TOKEN")
        .env_remove("CALLBACKD_URL")
        .env_remove("CALLBACKD_CONFIG")
        .envs(env.iter().copied())
        .output()
        .await
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_follow_sessions_and_runs_commands() {
    let app = spawn().await;
    let u = url(&app);
    finished_run(&app, "run-c3").await;

    // Plain lines when stdout is not a terminal: no escape codes, one event per line.
    let (code, out, err) = cli(&["follow", "run-c3", "--url", &u, "--token", TOKEN], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains('\x1b'), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 8, "{out}");
    assert!(
        lines[0].starts_with("   #1 ") && lines[0].contains("started"),
        "{out}"
    );
    assert!(
        lines[4].contains("tool") && lines[4].contains("echo ok"),
        "{out}"
    );
    assert!(
        lines[7].contains("completed") && lines[7].contains("finished: Echo said ping."),
        "{out}"
    );

    // --json: the API's objects, one per line; the token may come from the environment.
    let (code, out, err) = cli(
        &["follow", "run-c3", "--url", &u, "--json"],
        &[("CALLBACKD_API_TOKEN", READ_TOKEN)],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let seqs: Vec<u64> = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
        .filter(|e| e["type"] != "up_to_date")
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=8).collect::<Vec<_>>());

    let (code, out, err) = cli(&["sessions", "--url", &u, "--token", TOKEN], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().any(|l| l.starts_with(AGENT)), "{out}");
    let (code, out, err) = cli(&["runs", AGENT, "--url", &u, "--token", TOKEN], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("run-c3") && l.contains("finished")),
        "{out}"
    );

    // Bad input: a clear message and a failing exit status.
    let (code, _, err) = cli(
        &[
            "follow",
            "run-c3",
            "--url",
            &u,
            "--token",
            "wrong-token-0123456789abcdef",
        ],
        &[],
    )
    .await;
    assert_eq!(code, 1);
    assert!(err.contains("HTTP 401"), "{err}");
    let (code, _, err) = cli(
        &[
            "follow",
            "run-c3",
            "--url",
            "https://example.invalid/",
            "--token",
            TOKEN,
        ],
        &[],
    )
    .await;
    assert_eq!(code, 1);
    assert!(err.contains("only http://"), "{err}");
    let (code, _, err) = cli(
        &["runs", "no-such-agent", "--url", &u, "--token", TOKEN],
        &[],
    )
    .await;
    assert_eq!(code, 1);
    assert!(
        err.contains("no session") && err.contains("HTTP 404"),
        "{err}"
    );
}

#[tokio::test]
async fn follow_of_a_failed_run_shows_the_bridge_failure_text_and_exits_non_zero() {
    let app = spawn().await;
    session(&app, "run-c4").await;
    first_half(&app, "run-c4").await;
    second_half(&app, "run-c4", "ERROR").await;
    let (code, out, err) = cli(
        &["follow", "run-c4", "--url", &url(&app), "--token", TOKEN],
        &[],
    )
    .await;
    assert_eq!(code, 1, "{out}");
    let last = out.lines().last().unwrap_or_default();
    assert!(
        last.contains("error") && last.contains("[internal] the backend went away"),
        "{out}"
    );
    assert!(err.contains("ended with status error"), "{err}");
}

#[tokio::test]
async fn follow_of_a_pruned_run_shows_what_callbackd_kept_of_it() {
    let app = spawn().await;
    finished_run(&app, "run-c5").await;
    // Pruned through the running daemon's own records (either backend).
    let records = app.store.clone().run_records();
    let report = callbackd::api::retention::prune(&*records, Duration::ZERO, 10)
        .await
        .unwrap();
    assert_eq!(report.events, 8);
    drop(records);
    // 410 replay_expired: no events to show, so the run's state, and the run's own status.
    let (code, out, err) = cli(
        &["follow", "run-c5", "--url", &url(&app), "--token", TOKEN],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("removed by retention"), "{err}");
    assert!(out.contains("run run-c5 status finished"), "{out}");
    assert!(out.contains("output: Echo said ping."), "{out}");
}

/// `--db` and `--config` that put the binary on `app`'s store: its SQLite file, or the
/// PostgreSQL URL with the test's schema in a config file written into `dir`.
fn store_args(app: &TestApp, dir: &std::path::Path) -> Vec<String> {
    let config = dir.join("store.toml");
    let (db, text) = match &app.pg {
        Some(pg) => (
            pg.url.clone(),
            format!("[store]\nschema = \"{}\"\n", pg.schema),
        ),
        None => (app.db.display().to_string(), String::new()),
    };
    std::fs::write(&config, text).unwrap();
    vec![
        "--db".into(),
        db,
        "--config".into(),
        config.display().to_string(),
    ]
}

/// Issue 24: `callbackd prune --dry-run` as a user runs it, on either backend (`--db` is the
/// SQLite file or a postgres:// URL): it says what would go and removes nothing; the prune
/// that follows (no terminal, no --yes: as from cron) removes exactly that.
#[tokio::test]
async fn prune_dry_run_on_either_backend_says_what_would_go_and_changes_nothing() {
    let app = spawn().await;
    finished_run(&app, "run-c6").await;
    let events = "SELECT count(*) FROM run_events WHERE run_id = 'run-c6'";
    assert_eq!(app.count(events).await, 8);
    let home = tempfile::tempdir().unwrap();
    let store = store_args(&app, home.path());
    let store: Vec<&str> = store.iter().map(String::as_str).collect();
    let env = [("HOME", home.path().to_str().unwrap())];

    let args = [&store[..], &["prune", "--older-than", "0s", "--dry-run"]].concat();
    let (code, out, err) = cli(&args, &env).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.starts_with("would remove the events of 1 runs (8 events, "),
        "{out}"
    );
    assert!(out.contains("nothing changed (--dry-run)"), "{out}");
    assert_eq!(app.count(events).await, 8, "a dry run removed events");

    let args = [&store[..], &["prune", "--older-than", "0s"]].concat();
    let (code, out, err) = cli(&args, &env).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.starts_with("pruned the events of 1 runs (8 events)"),
        "{out}"
    );
    assert_eq!(app.count(events).await, 0);
}

/// Issue 24: a client command given the daemon's `--db` finds that daemon (its runtime file
/// and tokens file), on either backend: with `--db postgres://…` they are in the data
/// directory, as the daemon's own `--db postgres://…` put them.
#[tokio::test]
async fn a_client_command_with_the_daemons_db_finds_it_on_either_backend() {
    let app = spawn().await;
    session(&app, "run-c7").await;
    let home = tempfile::tempdir().unwrap();
    let store = store_args(&app, home.path());
    let store: Vec<&str> = store.iter().map(String::as_str).collect();
    let xdg = home.path().join("xdg");
    let env = [
        ("HOME", home.path().to_str().unwrap()),
        ("XDG_DATA_HOME", xdg.to_str().unwrap()),
    ];
    let mut daemon = tokio::process::Command::new(env!("CARGO_BIN_EXE_callbackd"))
        .args([&store[..], &["serve", "--listen", "127.0.0.1:0"]].concat())
        .env_remove("CALLBACKD_API_TOKEN")
        .env_remove("CALLBACKD_CONFIG")
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("serve starts");
    let mut lines =
        tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(daemon.stderr.take().unwrap()));
    let ready = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.starts_with("callbackd ready ") {
                return line;
            }
        }
        panic!("serve ended before its ready line");
    })
    .await
    .expect("ready within 30 s");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    let args = [&store[..], &["sessions"]].concat();
    let (code, out, err) = cli(&args, &env).await;
    assert_eq!(code, 0, "{ready}\n{out}\n{err}");
    assert!(out.contains(AGENT), "{out}\n{err}");
    daemon.kill().await.unwrap();
}

#[tokio::test]
async fn sessions_lists_names_in_line_whatever_the_id_length_and_says_when_there_are_none() {
    let app = spawn().await;
    let u = url(&app);

    // None: no header over nothing, and a sentence saying how to make one.
    let (code, out, err) = cli(&["sessions", "--url", &u, "--token", TOKEN], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "", "no header over an empty table");
    assert!(err.starts_with("no sessions yet"), "{err}");

    let long = "agent-from-another-sdk-0123456789-0123456789-0123456789";
    for (id, at) in [(AGENT, 1_780_000_000_000i64), (long, 1_780_000_000_001)] {
        app.store_ok("agents", "create", json!({"agent": agent(id, "/ws", at)}))
            .await;
    }
    let r = app
        .api(
            "PATCH",
            &format!("/v1/sessions/{AGENT}"),
            Some(TOKEN),
            r#"{"name": "Q3 plan"}"#,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());

    let (code, out, err) = cli(&["sessions", "--url", &u, "--token", TOKEN], &[]).await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[0].starts_with("SESSION "), "{out}");
    assert!(lines[0].contains(" NAME "), "{out}");
    // Every column starts where its header does, the long id's row too.
    for header in ["NAME", "STATUS", "MODEL", "LAST ACTIVITY", "WORKSPACE"] {
        let at = lines[0].find(header).unwrap();
        for line in &lines[1..] {
            assert_eq!(&line[at - 2..at], "  ", "{header} out of line:\n{out}");
        }
    }
    let named = lines.iter().find(|l| l.starts_with(AGENT)).unwrap();
    assert!(named.contains("  Q3 plan  "), "{out}");
    assert!(named.contains("2026-05-28 "), "a date on the time: {out}");
    // --json: the API's objects, the name among them.
    let (_, out, _) = cli(&["sessions", "--url", &u, "--token", TOKEN, "--json"], &[]).await;
    let names: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["name"].clone())
        .collect();
    assert!(names.contains(&json!("Q3 plan")), "{out}");
}
