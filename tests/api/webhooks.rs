//! Webhooks (`[[webhooks]]`, docs/webhooks.md) against the real server and a receiver on
//! 127.0.0.1 that checks every signature itself (HMAC-SHA256 over `id.timestamp.body`, as the
//! Standard Webhooks specification writes it). The bridge is played by store and tool calls;
//! tests/e2e/test_webhooks.py does it with the real bridge and the `standardwebhooks`
//! package.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{json, Value};

use crate::helpers::{run, TestApp};

const T: Duration = Duration::from_secs(15);
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Got {
    id: String,
    timestamp: String,
    signature_ok: bool,
    body: Value,
    /// The status it answered.
    answered: u16,
}

/// A webhook receiver: answers the statuses of `script` in turn, then 200.
struct Receiver {
    addr: SocketAddr,
    got: Arc<Mutex<Vec<Got>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    async fn start(script: &[u16]) -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::on(listener, script)
    }

    fn on(listener: tokio::net::TcpListener, script: &[u16]) -> Receiver {
        let addr = listener.local_addr().unwrap();
        let got: Arc<Mutex<Vec<Got>>> = Arc::default();
        let script = Arc::new(Mutex::new(script.iter().copied().collect::<VecDeque<_>>()));
        let kept = got.clone();
        let router = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: http::HeaderMap, body: bytes::Bytes| {
                let (kept, script) = (kept.clone(), script.clone());
                async move {
                    let h = |k: &str| {
                        headers
                            .get(k)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_string()
                    };
                    let (id, timestamp) = (h("webhook-id"), h("webhook-timestamp"));
                    let signature_ok = verify(&id, &timestamp, &body, &h("webhook-signature"));
                    let status = script.lock().unwrap().pop_front().unwrap_or(200);
                    kept.lock().unwrap().push(Got {
                        id,
                        timestamp,
                        signature_ok,
                        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                        answered: status,
                    });
                    let mut answer = http::Response::new(axum::body::Body::empty());
                    *answer.status_mut() = http::StatusCode::from_u16(status).unwrap();
                    if status / 100 == 3 {
                        answer
                            .headers_mut()
                            .insert("location", "/elsewhere".parse().unwrap());
                    }
                    answer
                }
            }),
        );
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        Receiver { addr, got, task }
    }

    fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    /// What arrived, once `until` holds for it.
    async fn wait(&self, what: &str, until: impl Fn(&[Got]) -> bool) -> Vec<Got> {
        let deadline = tokio::time::Instant::now() + T;
        loop {
            let got = self.got.lock().unwrap().clone();
            if until(&got) {
                return got;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{what} did not arrive; got {:#?}",
                got.iter()
                    .map(|g| (&g.body["type"], g.answered))
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// The requests for events of `kind`, once there are `n`.
    async fn of(&self, kind: &str, n: usize) -> Vec<Got> {
        let of = |g: &[Got]| -> Vec<Got> {
            g.iter()
                .filter(|g| g.body["type"] == kind)
                .cloned()
                .collect()
        };
        of(&self.wait(kind, |g| of(g).len() >= n).await)
    }
}

/// The Standard Webhooks check, written from the specification: `v1,` + base64 of
/// HMAC-SHA256(key = base64-decoded secret after `whsec_`, `id.timestamp.body`).
fn verify(id: &str, timestamp: &str, body: &[u8], signature: &str) -> bool {
    let b64 = base64::engine::general_purpose::STANDARD;
    let key = b64.decode(SECRET.strip_prefix("whsec_").unwrap()).unwrap();
    let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    let expected = format!("v1,{}", b64.encode(mac.finalize().into_bytes()));
    signature.split(' ').any(|s| s == expected)
}

fn hook(url: &str, backoff: &[u64]) -> callbackd::config::WebhookConfig {
    callbackd::config::WebhookConfig {
        url: url.to_string(),
        secret: Some(callbackd::secret::Secret::new(SECRET.into())),
        retry_backoff_ms: backoff.to_vec(),
        timeout_ms: 3000,
        ..Default::default()
    }
}

/// `GET /v1/webhooks/deliveries?state=STATE`, once it lists `n` (a delivery is settled a
/// moment after its receiver had it).
async fn listed(app: &TestApp, state: &str, n: usize) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let r = app
            .api_get(&format!("/v1/webhooks/deliveries?state={state}"))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let items = r.json()["deliveries"].as_array().unwrap().clone();
        if items.len() >= n {
            return items;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{n} {state} deliveries were never listed: {items:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A daemon with a `deploy` tool that always waits for approval, sending to `hooks`.
async fn spawn(hooks: Vec<callbackd::config::WebhookConfig>) -> Arc<TestApp> {
    spawn_in(tempfile::tempdir().unwrap(), hooks).await
}

async fn spawn_in(
    dir: tempfile::TempDir,
    hooks: Vec<callbackd::config::WebhookConfig>,
) -> Arc<TestApp> {
    let tool = crate::helpers::held_deploy_tool();
    Arc::new(
        TestApp::spawn_in(dir, move |c| {
            c.tools.command.push(tool);
            c.webhooks = hooks;
        })
        .await,
    )
}

/// The bridge's held `deploy` call of run r1, in a task of its own.
fn deploy(app: &Arc<TestApp>) -> tokio::task::JoinHandle<Value> {
    let app = app.clone();
    let body = json!({"toolName": "deploy", "args": {"env": "prod"}, "toolCallId": "toolu_1", "agentId": "a1"});
    tokio::spawn(async move {
        let token = app.tool_token.clone();
        app.call_tool_as(&token, &body).await
    })
}

/// The bridge ends run r1.
async fn finish_r1(app: &TestApp) {
    let mut r = run("a1", "r1", 1);
    r["status"] = json!("finished");
    r["startedAt"] = json!(1_780_000_000_000i64);
    r["endedAt"] = json!(1_780_000_004_250i64);
    r["usage"] = json!({"inputTokens": 10, "outputTokens": 5, "totalTokens": 15});
    app.store_ok("runs", "update", json!({"run": r})).await;
}

#[tokio::test]
async fn a_held_call_its_decision_and_the_runs_end_are_delivered_signed() {
    let rx = Receiver::start(&[]).await;
    let app = spawn(vec![hook(&rx.url(), &[100])]).await;
    app.running_run_r1().await;
    let task = deploy(&app);
    let required = rx.of("approval.required", 1).await.remove(0);
    assert!(required.signature_ok, "the signature verifies");
    assert!(required.id.starts_with("msg_"), "{}", required.id);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let ts: i64 = required.timestamp.parse().unwrap();
    assert!(
        (now - ts).abs() < 60,
        "webhook-timestamp is now, in seconds"
    );
    let data = &required.body["data"];
    assert_eq!(data["namespace"], "default");
    assert_eq!(data["session"], "a1");
    assert_eq!(data["run"], "r1");
    assert_eq!(data["approval"]["tool"], "deploy");
    assert_eq!(data["approval"]["arguments"], json!({"env": "prod"}));
    assert!(data["approval"]["expires_at"]
        .as_str()
        .unwrap()
        .ends_with('Z'));
    let console = data["console_url"].as_str().unwrap();
    assert!(console.ends_with("/ui/#/runs/r1"), "{console}");
    assert!(!console.contains("token"), "{console}");
    let id = data["approval"]["id"].as_str().unwrap().to_string();

    let r = app
        .api(
            "POST",
            &format!("/v1/approvals/{id}"),
            Some(&app.api_token),
            r#"{"decision": "approve", "reason": "ship it"}"#,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let result = tokio::time::timeout(T, task).await.unwrap().unwrap();
    assert_eq!(result["deployed"], true);
    let resolved = rx.of("approval.resolved", 1).await.remove(0);
    assert!(resolved.signature_ok);
    assert_ne!(resolved.id, required.id, "each event has its own id");
    let approval = &resolved.body["data"]["approval"];
    assert_eq!(approval["id"], id.as_str());
    assert_eq!(approval["state"], "approved");
    assert_eq!(approval["reason"], "ship it");

    finish_r1(&app).await;
    // The bridge writes the ended run again (its checkpoint ref): still one event.
    finish_r1(&app).await;
    let ended = rx.of("run.ended", 1).await.remove(0);
    assert!(ended.signature_ok);
    let data = &ended.body["data"];
    assert_eq!(data["status"], "finished");
    assert_eq!(data["duration_ms"], 4250);
    assert_eq!(data["usage"]["totalTokens"], 15);
    assert_eq!(data["run"], "r1");

    // GET /v1/webhooks/deliveries shows the three, delivered at the first attempt.
    let items = listed(&app, "delivered", 3).await;
    let kinds: Vec<&str> = items.iter().map(|d| d["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["run.ended", "approval.resolved", "approval.required"]
    );
    for d in &items {
        assert_eq!(d["state"], "delivered", "{d}");
        assert_eq!(d["attempts"], 1, "{d}");
        assert_eq!(d["last_status"], 200, "{d}");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        rx.got.lock().unwrap().len(),
        3,
        "each event was delivered once"
    );
    let bad = app.api_get("/v1/webhooks/deliveries?state=lost").await;
    assert_eq!(bad.status, 400);
    assert!(bad.text().contains("state must be"), "{}", bad.text());
    let metrics = app
        .request(
            "GET",
            "/metrics",
            &[],
            "",
            crate::helpers::Framing::ContentLength,
        )
        .await
        .text();
    assert!(
        metrics.contains(r#"callbackd_webhook_deliveries_total{outcome="delivered"} 3"#),
        "{metrics}"
    );
    rx.task.abort();
}

#[tokio::test]
async fn a_receiver_that_fails_twice_gets_the_third_attempt_with_the_same_id() {
    let rx = Receiver::start(&[500, 503]).await;
    let app = spawn(vec![hook(&rx.url(), &[100, 100, 100])]).await;
    app.running_run_r1().await;
    finish_r1(&app).await;
    let got = rx.of("run.ended", 3).await;
    assert_eq!(
        got.iter().map(|g| g.answered).collect::<Vec<_>>(),
        [500, 503, 200]
    );
    assert!(got.iter().all(|g| g.id == got[0].id), "one webhook-id");
    assert!(
        got.iter().all(|g| g.signature_ok),
        "every attempt is signed"
    );
    let d = listed(&app, "delivered", 1).await.remove(0);
    assert_eq!(d["attempts"], 3, "{d}");
    assert_eq!(d["id"], got[0].id.as_str());
    // `callbackd webhooks` shows it; `--state failed` shows nothing.
    let url = format!("http://{}", app.addr);
    let args = ["webhooks", "--url", &url, "--token", &app.api_token];
    let (code, out, err) = crate::client::cli(&args, &[]).await;
    assert_eq!(code, 0, "{err}");
    let line = out.lines().find(|l| l.contains("run.ended")).expect(&out);
    assert!(
        line.contains("delivered") && line.contains(" 3 ") && line.ends_with("200"),
        "{out}"
    );
    let (code, out, err) =
        crate::client::cli(&[&args[..], &["--state", "failed"]].concat(), &[]).await;
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    assert!(err.contains("no webhook deliveries"), "{err}");
    rx.task.abort();
}

#[tokio::test]
async fn a_redirect_is_not_followed_and_the_last_failure_gives_up() {
    let rx = Receiver::start(&[302, 302]).await;
    let app = spawn(vec![hook(&rx.url(), &[50])]).await;
    app.running_run_r1().await;
    finish_r1(&app).await;
    let got = rx.of("run.ended", 2).await;
    assert_eq!(got.len(), 2, "two attempts, no redirect followed");
    let d = listed(&app, "failed", 1).await.remove(0);
    assert_eq!(d["attempts"], 2);
    assert_eq!(d["last_status"], 302);
    assert!(d["last_error"].as_str().unwrap().contains("302"), "{d}");
    rx.task.abort();
}

#[tokio::test]
async fn a_delivery_whose_receiver_was_down_arrives_after_a_restart() {
    // A port nobody listens on yet: the first attempt is refused.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let url = format!("http://{addr}/hook");
    let app = spawn(vec![hook(&url, &[500])]).await;
    app.running_run_r1().await;
    finish_r1(&app).await;
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let list = app.api_get("/v1/webhooks/deliveries").await.json();
        if list["deliveries"][0]["attempts"] == 1 {
            let error = list["deliveries"][0]["last_error"]
                .as_str()
                .unwrap()
                .to_string();
            assert!(!error.is_empty());
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no attempt: {list}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let app = Arc::try_unwrap(app).ok().expect("one owner");
    let dir = app.stop().await;
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let rx = Receiver::on(listener, &[]);
    let app = spawn_in(dir, vec![hook(&url, &[500])]).await;
    let got = rx.of("run.ended", 1).await;
    assert!(got[0].signature_ok);
    assert_eq!(got[0].body["data"]["run"], "r1");
    let d = listed(&app, "delivered", 1).await.remove(0);
    assert_eq!(d["attempts"], 2, "{d}");
    rx.task.abort();
}

#[tokio::test]
async fn filters_choose_what_each_endpoint_is_sent() {
    let all = Receiver::start(&[]).await;
    let runs = Receiver::start(&[]).await;
    let mut only_runs = hook(&runs.url(), &[100]);
    only_runs.events = Some(vec!["run.ended".into()]);
    let mut other_ns = hook(&format!("{}?ns=other", runs.url()), &[100]);
    other_ns.namespaces = Some(vec!["other".into()]);
    let app = spawn(vec![hook(&all.url(), &[100]), only_runs, other_ns]).await;
    app.running_run_r1().await;
    let task = deploy(&app);
    let required = all.of("approval.required", 1).await.remove(0);
    let id = required.body["data"]["approval"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = app
        .api(
            "POST",
            &format!("/v1/approvals/{id}"),
            Some(&app.api_token),
            r#"{"decision": "deny"}"#,
        )
        .await;
    assert_eq!(r.status, 200);
    tokio::time::timeout(T, task).await.unwrap().unwrap();
    finish_r1(&app).await;
    all.of("run.ended", 1).await;
    let got = runs.of("run.ended", 1).await;
    assert_eq!(
        runs.got.lock().unwrap().len(),
        1,
        "the run.ended-only endpoint got nothing else, the other namespace's nothing"
    );
    // Both endpoints got the same event id.
    let ended = all.of("run.ended", 1).await.remove(0);
    assert_eq!(got[0].id, ended.id);
    all.task.abort();
    runs.task.abort();
}

/// A delivery per run that ends, for a URL no daemon here sends to (no worker claims them).
struct EveryRunEnd;

impl callbackd::store::outbox::Composer for EveryRunEnd {
    fn compose(
        &self,
        happening: &callbackd::store::outbox::Happening<'_>,
    ) -> Vec<callbackd::store::outbox::OutboxEntry> {
        let callbackd::store::outbox::Happening::RunUpdated {
            ns, run_id, doc, ..
        } = happening
        else {
            return Vec::new();
        };
        if !doc.contains("finished") {
            return Vec::new();
        }
        vec![callbackd::store::outbox::OutboxEntry {
            id: format!("msg_{run_id}"),
            url: "http://127.0.0.1:9/claims".into(),
            ns: ns.as_str().to_string(),
            kind: "run.ended".into(),
            run_id: Some(run_id.to_string()),
            body: "{}".into(),
            created_at_ms: 1,
        }]
    }
}

#[tokio::test]
async fn two_claimers_at_once_never_take_the_same_delivery() {
    use callbackd::store::outbox::Claim;
    let app = TestApp::spawn().await;
    app.store.set_outbox(Arc::new(EveryRunEnd));
    app.store_ok(
        "agents",
        "create",
        json!({"agent": crate::helpers::agent("a1", "/ws", 1)}),
    )
    .await;
    for i in 0..20 {
        let mut r = run("a1", &format!("r{i}"), i + 1);
        app.store_ok("runs", "create", json!({"run": r.clone()}))
            .await;
        r["status"] = json!("finished");
        app.store_ok("runs", "update", json!({"run": r})).await;
    }
    let records = app.store.clone().outbox_records();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let claim = |owner: &str| Claim {
        owner: owner.into(),
        now_ms: now,
        until_ms: now + 60_000,
        urls: vec!["http://127.0.0.1:9/claims".into()],
        limit: 7,
    };
    // Two daemons claiming in rounds, at the same moment each round (on PostgreSQL, two
    // connections: SKIP LOCKED and the lease keep them apart).
    let mut seen = std::collections::HashMap::<String, String>::new();
    for _ in 0..4 {
        let (a, b) = tokio::join!(
            records.claim_deliveries(claim("a")),
            records.claim_deliveries(claim("b"))
        );
        for (owner, got) in [("a", a.unwrap()), ("b", b.unwrap())] {
            for d in got {
                if let Some(first) = seen.insert(d.entry.id.clone(), owner.to_string()) {
                    panic!("{} claimed by {first} and again by {owner}", d.entry.id);
                }
            }
        }
    }
    assert_eq!(seen.len(), 20, "every due delivery was claimed, once");
    // A claim that ran out (its daemon died) makes the rows due again.
    let mut later = claim("c");
    later.now_ms = now + 61_000;
    later.until_ms = now + 120_000;
    later.limit = 100;
    assert_eq!(records.claim_deliveries(later).await.unwrap().len(), 20);
}
