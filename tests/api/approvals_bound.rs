//! Issue 25: an approval lives and dies with its call, the record is the truth, and a
//! pending approval belongs to the daemon that holds the call. The tool writes the
//! arguments it ran with to a marker file: its absence proves it never ran.
//!
//! Runs on SQLite, and on PostgreSQL with `CALLBACKD_TEST_BACKEND=postgres`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use std::os::unix::process::ExitStatusExt;

use crate::helpers::{run, TestApp, TOOL_PATH};

const T: Duration = Duration::from_secs(10);

pub(crate) fn marker_tool(marker: &Path, extra: &str) -> callbackd::config::CommandToolConfig {
    toml::from_str(&marker_tool_toml(marker, extra)).unwrap()
}

/// [`marker_tool`] as the TOML of a `[[tools.command]]` entry.
fn marker_tool_toml(marker: &Path, extra: &str) -> String {
    format!(
        r#"
name = "deploy"
description = "Deploys"
argv = ["sh", "-c", "cat > '{}'; echo '{{\"deployed\": true}}'"]
input_schema = {{ type = "object", properties = {{ env = {{ type = "string" }} }} }}
approval = "always"
{extra}
"#,
        marker.display()
    )
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
pub(crate) fn call(app: &Arc<TestApp>, env: &str) -> tokio::task::JoinHandle<Value> {
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

pub(crate) async fn first_pending(app: &TestApp) -> Value {
    for _ in 0..250 {
        if let Some(a) = approvals(app, "pending").await.into_iter().next() {
            return a;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no pending approval appeared");
}

pub(crate) async fn decide(app: &TestApp, id: &str, body: Value) -> crate::helpers::Resp {
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

/// The path a user has: `callbackd run` with a bridge process under it, SIGTERM while a call
/// waits for a person. The fake bridge behaves as the real one does on SIGTERM: it stops only
/// once its tool calls have returned (the real one closes its server, which waits for them).
/// So the held call must be answered before the bridge is told to stop: otherwise the bridge
/// waits, is SIGKILLed at the stop timeout, and callbackd exits 137.
#[tokio::test]
async fn stopping_the_daemon_cancels_held_calls_first_and_records_why() {
    let marker_dir = tempfile::tempdir().unwrap();
    let marker = marker_dir.path().join("ran.json");
    let (dir, mut supervised, call, card) = supervised_with_a_held_call(&marker).await;
    supervised.signal(nix::sys::signal::Signal::SIGTERM);
    let (status, stderr) = supervised.wait_exit(supervise::STOP_TIMEOUT + Duration::from_secs(5));
    assert_eq!(status.code(), Some(0), "{status:?}\n{stderr}");
    assert!(!stderr.contains("SIGKILL"), "{stderr}");
    assert!(
        dir.path().join("stopped").exists(),
        "the bridge did not stop by itself\n{stderr}"
    );
    let (code, answer) = call.join().unwrap().expect("the held call was answered");
    assert_eq!(code, 200, "{answer}");
    assert!(
        text(&answer["result"]).contains("callbackd is stopping"),
        "{answer}"
    );
    assert!(!marker.exists(), "the tool ran");
    // The stored record, read by a daemon started again on the same store.
    let app = TestApp::spawn_in(dir, |c| c.tools.command.push(marker_tool(&marker, ""))).await;
    let one = app
        .api_get(&format!("/v1/approvals/{}", card["id"].as_str().unwrap()))
        .await
        .json();
    assert_eq!(one["state"], "cancelled", "{one}");
    assert_eq!(one["decided_by"], "callbackd", "{one}");
    assert_eq!(one["reason"], "callbackd is stopping", "{one}");
    app.stop().await;
}

/// The bridge's session `a1` and its running run `r1` in a supervised daemon on a new
/// store, stored the way the bridge stores them, and its `deploy` call held; returns the
/// store's directory, the daemon, the held call's thread (it writes `returned` once
/// answered) and the approval.
pub(crate) async fn supervised_with_a_held_call(
    marker: &Path,
) -> (
    tempfile::TempDir,
    supervise::Supervised,
    std::thread::JoinHandle<Option<(u16, Value)>>,
    Value,
) {
    let app = TestApp::spawn_with(|c| c.tools.command.push(marker_tool(marker, ""))).await;
    app.running_run_r1().await;
    let pg = app.pg.clone();
    let dir = app.stop().await;
    let supervised =
        supervise::Supervised::start(dir.path(), pg.as_ref(), &marker_tool_toml(marker, ""));
    let addr = supervised.addr;
    let mut r = crate::helpers::run("a1", "r1", 1);
    r["status"] = json!("running");
    let body = json!({"substore": "runs", "method": "update", "input": {"run": r}});
    let store = "/sdk.v1.SdkStoreCallbackService/CallStore";
    let (code, answer) = supervise::http(addr, "POST", store, supervise::STORE_TOKEN, &body);
    assert_eq!(code, 200, "{answer}");
    let call = std::thread::spawn({
        let returned = dir.path().join("returned");
        move || {
            let body = json!({"toolName": "deploy", "args": {"env": "prod"},
                              "toolCallId": "toolu_1", "agentId": "a1"});
            let answer = supervise::try_http(addr, "POST", TOOL_PATH, supervise::TOOL_TOKEN, &body);
            std::fs::write(returned, b"").unwrap();
            answer
        }
    });
    let deadline = std::time::Instant::now() + T;
    let card = loop {
        let (_, list) = supervise::http(
            addr,
            "GET",
            "/v1/approvals",
            supervise::API_TOKEN,
            &Value::Null,
        );
        if let Some(a) = list["approvals"].get(0) {
            break a.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the call was never held"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    (dir, supervised, call, card)
}

/// After the bridge's run was lost (`how`), a daemon on the same store: the run ended
/// `error` with the reason, every stream of it ends, its approval is cancelled with the same
/// reason, the tool never ran, and the session is free again.
async fn the_lost_run_has_ended(app: &TestApp, card: &Value, marker: &Path, how: &str) {
    let run = app.api_get("/v1/runs/r1").await.json();
    assert_eq!(run["status"], "error", "{how}: {run}");
    assert!(!run["ended_at"].is_null(), "{how}: {run}");
    let replay = app.stream("r1", None).await.collect(T).await;
    let last = replay.last().expect("a replay");
    assert_eq!(last.kind(), "error", "{how}: {replay:?}");
    assert!(
        last.data()
            .unwrap()
            .to_string()
            .contains("the bridge that ran it stopped"),
        "{how}: {replay:?}"
    );
    let id = card["id"].as_str().unwrap();
    let one = app.api_get(&format!("/v1/approvals/{id}")).await.json();
    assert_eq!(one["state"], "cancelled", "{how}: {one}");
    assert!(
        one["reason"]
            .as_str()
            .unwrap()
            .contains("the bridge that ran it stopped"),
        "{how}: {one}"
    );
    let late = decide(app, id, json!({"decision": "approve"})).await;
    assert_eq!(late.status, 409, "{how}: {}", late.text());
    assert!(!marker.exists(), "{how}: the tool ran");
    let session = app.api_get("/v1/sessions/a1").await.json();
    assert!(session["active_run_id"].is_null(), "{how}: {session}");
    let token = app.api_token.clone();
    let del = app.api("DELETE", "/v1/sessions/a1", Some(&token), "").await;
    assert_eq!(del.status, 204, "{how}: {}", del.text());
}

/// The bridge alone dies (a node crash): callbackd exits with its status, and before that
/// ends the run it left, so the restarted daemon finds it ended.
#[tokio::test]
async fn when_the_supervised_bridge_dies_its_runs_end_with_the_reason() {
    let marker_dir = tempfile::tempdir().unwrap();
    let marker = marker_dir.path().join("ran.json");
    let (dir, mut supervised, call, card) = supervised_with_a_held_call(&marker).await;
    let pid: i32 = std::fs::read_to_string(dir.path().join("bridge.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let (status, stderr) = supervised.wait_exit(supervise::STOP_TIMEOUT + Duration::from_secs(5));
    assert_eq!(status.code(), Some(137), "{status:?}\n{stderr}");
    let answer = call.join().unwrap();
    assert!(
        answer.is_some_and(|(_, a)| a.to_string().contains("the bridge that ran it stopped")),
        "{stderr}"
    );
    let app = TestApp::spawn_in(dir, |c| c.tools.command.push(marker_tool(&marker, ""))).await;
    the_lost_run_has_ended(&app, &card, &marker, "bridge killed").await;
    app.stop().await;
}

/// callbackd is killed (-9; its watchdog stops the bridge): the daemon started next on the
/// same data directory and store ends the run at its start.
#[tokio::test]
async fn after_a_kill_of_callbackd_the_next_start_ends_the_runs_its_bridge_left() {
    let marker_dir = tempfile::tempdir().unwrap();
    let marker = marker_dir.path().join("ran.json");
    let (dir, mut supervised, call, card) = supervised_with_a_held_call(&marker).await;
    supervised.signal(nix::sys::signal::Signal::SIGKILL);
    let (status, _) = supervised.wait_exit(Duration::from_secs(5));
    assert_eq!(status.signal(), Some(9));
    call.join().unwrap();
    // Before the restart: still `running` in the store; nothing else ended it.
    let app = TestApp::spawn_in(dir, |c| c.tools.command.push(marker_tool(&marker, ""))).await;
    the_lost_run_has_ended(&app, &card, &marker, "callbackd killed").await;
    app.stop().await;
}

#[path = "../common/fake_ping.rs"]
mod fake_ping;

/// `callbackd run` with the fake bridge, on a test's directory and store.
pub(crate) mod supervise {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::SocketAddr;
    use std::path::Path;
    use std::process::{Child, Command, ExitStatus, Stdio};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use serde_json::Value;

    use crate::helpers::PgTarget;

    use super::fake_ping;

    pub const STORE_TOKEN: &str = "store-token-of-the-supervised-test";
    pub const TOOL_TOKEN: &str = "tool-token-of-the-supervised-test";
    pub const API_TOKEN: &str = "api-token-of-the-supervised-test";
    pub const STOP_TIMEOUT: Duration = Duration::from_secs(5);

    /// On SIGTERM it waits for the file `returned` (its tool call got its answer), then
    /// writes `stopped` and exits 0: the real bridge's shutdown waits for its calls too.
    const FAKE_BRIDGE: &str = r#"
d="$FAKE_DIR"
trap 'while [ ! -e "$d/returned" ]; do sleep 0.05; done; echo > "$d/stopped"; exit 0' TERM
echo $$ > "$d/bridge.pid"
echo secret > "$d/auth-token"
printf 'cursor-sdk-bridge ready {"url":"%s","pid":%s,"authTokenFile":"%s"}\n' \
  "$FAKE_BRIDGE_URL" $$ "$d/auth-token" >&2
while :; do sleep 0.05; done
"#;

    pub struct Supervised {
        child: Child,
        pub addr: SocketAddr,
        lines: mpsc::Receiver<String>,
        stderr: Vec<String>,
    }

    impl Supervised {
        /// `callbackd run` on `dir`'s store (the SQLite file `test.db`, or `pg`'s schema)
        /// with the tools of `tools_toml`; returns once callbackd is ready.
        pub fn start(dir: &Path, pg: Option<&PgTarget>, tools_toml: &str) -> Supervised {
            let mut toml = String::new();
            if let Some(pg) = pg {
                // `path` anchors the data directory (tokens, runs files) as TestApp's does.
                toml.push_str(&format!(
                    "[store]\nbackend = \"postgres\"\nurl = \"{}\"\nschema = \"{}\"\npath = \"{}\"\n",
                    pg.url,
                    pg.schema,
                    dir.join("test.db").display()
                ));
            }
            toml.push_str(&format!("[[tools.command]]\n{tools_toml}"));
            let config = dir.join("supervised.toml");
            std::fs::write(&config, toml).unwrap();
            std::fs::write(dir.join("bridge.sh"), FAKE_BRIDGE).unwrap();
            let mut child = Command::new(env!("CARGO_BIN_EXE_callbackd"))
                .arg("run")
                .arg("--config")
                .arg(&config)
                .args(pg.is_none().then_some("--db"))
                .args(pg.is_none().then(|| dir.join("test.db")))
                .arg("--stop-timeout")
                .arg(STOP_TIMEOUT.as_secs().to_string())
                .arg("--")
                .arg("/bin/sh")
                .arg(dir.join("bridge.sh"))
                .env("FAKE_DIR", dir)
                .env("FAKE_BRIDGE_URL", fake_ping::fake_bridge_url())
                .env("CALLBACKD_STORE_TOKEN", STORE_TOKEN)
                .env("CALLBACKD_TOOL_TOKEN", TOOL_TOKEN)
                .env("CALLBACKD_API_TOKEN", API_TOKEN)
                .env_remove("CALLBACKD_LISTEN")
                .env_remove("CALLBACKD_CONFIG")
                .env_remove("CALLBACKD_DB")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn callbackd run");
            let stderr = child.stderr.take().unwrap();
            let (tx, lines) = mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        return;
                    }
                }
            });
            let mut me = Supervised {
                child,
                addr: "127.0.0.1:1".parse().unwrap(),
                lines,
                stderr: Vec::new(),
            };
            let deadline = Instant::now() + Duration::from_secs(30);
            let ready = loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match me.lines.recv_timeout(left) {
                    Ok(line) => {
                        me.stderr.push(line.clone());
                        if let Some(json) = line.strip_prefix("callbackd ready ") {
                            break serde_json::from_str::<Value>(json).unwrap();
                        }
                    }
                    Err(_) => panic!("callbackd run was never ready:\n{}", me.stderr.join("\n")),
                }
            };
            let url = ready["url"].as_str().unwrap();
            me.addr = url
                .trim_start_matches("http://")
                .trim_end_matches('/')
                .parse()
                .unwrap();
            me
        }

        pub fn signal(&self, sig: nix::sys::signal::Signal) {
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), sig)
                .unwrap();
        }

        /// Waits for callbackd to exit; its status and all of its stderr.
        pub fn wait_exit(&mut self, timeout: Duration) -> (ExitStatus, String) {
            let deadline = Instant::now() + timeout;
            let status = loop {
                if let Some(status) = self.child.try_wait().unwrap() {
                    break status;
                }
                assert!(
                    Instant::now() < deadline,
                    "callbackd did not exit within {timeout:?}:\n{}",
                    self.stderr.join("\n")
                );
                std::thread::sleep(Duration::from_millis(20));
            };
            while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
                self.stderr.push(line);
            }
            (status, self.stderr.join("\n"))
        }
    }

    impl Drop for Supervised {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// [`http`], or `None` when the daemon went away before it answered.
    pub fn try_http(
        addr: SocketAddr,
        method: &str,
        path: &str,
        token: &str,
        body: &Value,
    ) -> Option<(u16, Value)> {
        let (addr, method, path, token, body) = (
            addr,
            method.to_string(),
            path.to_string(),
            token.to_string(),
            body.clone(),
        );
        std::thread::spawn(move || http(addr, &method, &path, &token, &body))
            .join()
            .ok()
    }

    /// One request over a connection of its own (blocking): the status and the JSON body.
    pub fn http(
        addr: SocketAddr,
        method: &str,
        path: &str,
        token: &str,
        body: &Value,
    ) -> (u16, Value) {
        let body = if body.is_null() {
            String::new()
        } else {
            body.to_string()
        };
        let mut conn = std::net::TcpStream::connect(addr).unwrap();
        write!(
            conn,
            "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
             authorization: Bearer {token}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut raw = Vec::new();
        conn.read_to_end(&mut raw).unwrap();
        let raw = String::from_utf8_lossy(&raw);
        let (head, rest) = raw.split_once("\r\n\r\n").expect("an HTTP answer");
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        let text = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            dechunk(rest)
        } else {
            rest.to_string()
        };
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    fn dechunk(mut rest: &str) -> String {
        let mut out = String::new();
        while let Some((size, tail)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            out.push_str(&tail[..n]);
            rest = &tail[n + 2..];
        }
        out
    }
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
