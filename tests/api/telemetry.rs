//! OpenTelemetry traces of runs (`[telemetry]`, docs/telemetry.md) against the real server
//! and a tiny OTLP/HTTP collector on 127.0.0.1 that decodes what it receives with the
//! OpenTelemetry project's own protobuf types. The bridge is played by store and tool calls.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{json, Value};

use crate::helpers::{agent, run, Framing, TestApp};
use crate::run_api::append;

const T: Duration = Duration::from_secs(10);

/// An OTLP/HTTP traces endpoint that keeps every span it is sent.
struct Sink {
    addr: SocketAddr,
    spans: Arc<Mutex<Vec<(String, Span)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Sink {
    async fn start() -> Sink {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let spans: Arc<Mutex<Vec<(String, Span)>>> = Arc::default();
        let kept = spans.clone();
        let router = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: bytes::Bytes| {
                let kept = kept.clone();
                async move {
                    let req = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
                    for rs in req.resource_spans {
                        let service = rs
                            .resource
                            .iter()
                            .flat_map(|r| &r.attributes)
                            .find(|kv| kv.key == "service.name")
                            .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                                Any::StringValue(s) => Some(s.clone()),
                                _ => None,
                            })
                            .unwrap_or_default();
                        for ss in rs.scope_spans {
                            for span in ss.spans {
                                kept.lock().unwrap().push((service.clone(), span));
                            }
                        }
                    }
                    (
                        [("content-type", "application/x-protobuf")],
                        Vec::<u8>::new(),
                    )
                }
            }),
        );
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        Sink { addr, spans, task }
    }

    /// The spans received, once at least `n` are there.
    async fn wait_for(&self, n: usize) -> Vec<(String, Span)> {
        let deadline = tokio::time::Instant::now() + T;
        loop {
            let got = self.spans.lock().unwrap().clone();
            if got.len() >= n {
                return got;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "only {} spans arrived: {:?}",
                got.len(),
                got.iter().map(|(_, s)| &s.name).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn attrs(span: &Span) -> HashMap<String, Value> {
    span.attributes
        .iter()
        .filter_map(|kv| {
            let v = match kv.value.as_ref()?.value.as_ref()? {
                Any::StringValue(s) => json!(s),
                Any::IntValue(i) => json!(i),
                Any::BoolValue(b) => json!(b),
                Any::DoubleValue(d) => json!(d),
                _ => return None,
            };
            Some((kv.key.clone(), v))
        })
        .collect()
}

/// A daemon with a `deploy` tool that needs approval, exporting to `endpoint`.
async fn spawn(endpoint: String, capture_content: bool) -> Arc<TestApp> {
    let tool = crate::helpers::held_deploy_tool();
    let app = TestApp::spawn_with(move |c| {
        c.tools.command.push(tool);
        c.telemetry.otlp_endpoint = Some(endpoint);
        c.telemetry.service_name = Some("callbackd-test".into());
        c.telemetry.capture_content = capture_content;
    })
    .await;
    Arc::new(app)
}

/// Run `run_id` (turn `turn`) of session `a1` is active; the session is made for turn 1.
async fn start_run(app: &TestApp, run_id: &str, turn: i64) {
    let mut a = agent("a1", "/ws", 1_780_000_000_000);
    a["activeRunId"] = json!(run_id);
    let method = if turn == 1 { "create" } else { "update" };
    app.store_ok("agents", method, json!({"agent": a})).await;
    let mut r = run("a1", run_id, turn);
    r["status"] = json!("running");
    app.store_ok("runs", "create", json!({"run": r})).await;
}

/// The run ends as the bridge ends it: its terminal `status` event (`event_status`, e.g.
/// `FINISHED`), then its document's status, the `runs.update` the store announces as the
/// run's end (`StoreNotice::RunEnded`), which starts the trace.
async fn end_run(app: &TestApp, run_id: &str, event_status: &str, message: Option<&str>) {
    let mut event = json!({"type": "status", "status": event_status});
    if let Some(m) = message {
        event["message"] = json!(m);
    }
    append(app, run_id, event).await;
    let mut doc = app
        .store_ok("runs", "get", json!({"agentId": "a1", "runId": run_id}))
        .await
        .expect("the run's document");
    doc["status"] = json!(event_status.to_ascii_lowercase());
    app.store_ok("runs", "update", json!({"run": doc})).await;
}

fn tool_event(call_id: &str, status: &str) -> Value {
    let mut m = json!({"type": "tool_call", "call_id": call_id, "name": "mcp", "status": status,
        "args": {"providerIdentifier": "custom-user-tools", "toolName": "deploy", "args": {"env": "prod-secret-env"}}});
    if status == "completed" {
        m["result"] = json!({"status": "success", "value": {"deployed": true}});
    }
    m
}

/// A whole turn as the bridge stores it, with one `deploy` call approved by the run API.
async fn approved_turn(app: &Arc<TestApp>, run_id: &str, call_id: &str) {
    append(
        app,
        run_id,
        json!({"type": "request", "agent_id": "a1", "run_id": run_id, "request_id": "q1"}),
    )
    .await;
    append(app, run_id, json!({"type": "status", "status": "RUNNING"})).await;
    append(app, run_id, tool_event(call_id, "running")).await;
    let call = {
        let app = app.clone();
        let body = json!({"toolName": "deploy", "args": {"env": "prod-secret-env"}, "toolCallId": call_id, "agentId": "a1"});
        tokio::spawn(async move { app.call_tool_as(&app.tool_token, &body).await })
    };
    let id = loop {
        let list = app.api_get("/v1/approvals").await.json();
        if let Some(id) = list["approvals"][0]["id"].as_str() {
            break id.to_string();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let token = app.api_token.clone();
    let r = app
        .api(
            "POST",
            &format!("/v1/approvals/{id}"),
            Some(&token),
            r#"{"decision": "approve", "reason": "looks fine"}"#,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let result = tokio::time::timeout(T, call).await.unwrap().unwrap();
    assert_eq!(result["deployed"], true, "{result}");
    append(app, run_id, tool_event(call_id, "completed")).await;
    append(app, run_id, json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "Deployed."}]}})).await;
    append(
        app,
        run_id,
        json!({"type": "usage", "usage": {"inputTokens": 20, "outputTokens": 12}}),
    )
    .await;
    end_run(app, run_id, "FINISHED", None).await;
}

fn named<'a>(spans: &'a [(String, Span)], prefix: &str) -> &'a Span {
    &spans
        .iter()
        .find(|(_, s)| s.name.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix} span"))
        .1
}

#[tokio::test]
async fn a_run_is_an_agent_span_with_its_tool_call_and_approval_and_no_content_by_default() {
    let sink = Sink::start().await;
    let app = spawn(format!("http://{}", sink.addr), false).await;
    start_run(&app, "r1", 1).await;
    approved_turn(&app, "r1", "toolu_1").await;
    let spans = sink.wait_for(3).await;
    assert_eq!(spans.len(), 3, "one agent, one tool, one approval span");
    assert!(spans.iter().all(|(service, _)| service == "callbackd-test"));
    let agent = named(&spans, "invoke_agent");
    let tool = named(&spans, "execute_tool deploy");
    let approval = named(&spans, "approval deploy");
    assert_eq!(agent.trace_id.len(), 16);
    assert_ne!(agent.trace_id, vec![0; 16], "a real trace id");
    assert!(spans.iter().all(|(_, s)| s.trace_id == agent.trace_id));
    assert!(agent.parent_span_id.is_empty());
    assert_eq!(tool.parent_span_id, agent.span_id);
    assert_eq!(approval.parent_span_id, tool.span_id);
    // Times are the stored ones, nested.
    assert!(agent.start_time_unix_nano <= tool.start_time_unix_nano);
    assert!(tool.start_time_unix_nano <= approval.start_time_unix_nano);
    assert!(approval.end_time_unix_nano <= tool.end_time_unix_nano);
    assert!(tool.end_time_unix_nano <= agent.end_time_unix_nano);

    let a = attrs(agent);
    assert_eq!(a["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(a["gen_ai.agent.id"], "a1");
    assert_eq!(a["gen_ai.conversation.id"], "a1");
    assert_eq!(a["gen_ai.request.model"], "composer-2");
    assert_eq!(a["gen_ai.usage.input_tokens"], 20);
    assert_eq!(a["gen_ai.usage.output_tokens"], 12);
    assert_eq!(a["llm.token_count.total"], 32);
    assert_eq!(a["openinference.span.kind"], "AGENT");
    assert_eq!(a["callbackd.run_id"], "r1");
    assert_eq!(a["callbackd.namespace"], "default");
    assert_eq!(a["callbackd.turn"], 1);
    assert_eq!(a["callbackd.run.status"], "finished");
    let t = attrs(tool);
    assert_eq!(t["gen_ai.tool.name"], "deploy");
    assert_eq!(t["gen_ai.tool.call.id"], "toolu_1");
    assert_eq!(t["callbackd.tool.outcome"], "ok");
    assert_eq!(t["openinference.span.kind"], "TOOL");
    let p = attrs(approval);
    assert_eq!(p["callbackd.approval.decision"], "approved");
    assert_eq!(p["callbackd.approval.decided_by"], "default/api");
    assert_eq!(p["callbackd.approval.reason"], "looks fine");
    // capture_content is off: no arguments, results, input or output anywhere.
    for (_, s) in &spans {
        let all = format!("{:?}", s.attributes);
        assert!(!all.contains("prod-secret-env"), "{}: {all}", s.name);
        assert!(!all.contains("Deployed."), "{}: {all}", s.name);
        assert!(!attrs(s).contains_key("input.value"), "{}", s.name);
    }
    let metrics = app
        .request("GET", "/metrics", &[], "", Framing::ContentLength)
        .await
        .text();
    assert!(
        metrics.contains("callbackd_telemetry_spans_exported_total 3"),
        "{metrics}"
    );
    sink.task.abort();
}

#[tokio::test]
async fn with_capture_content_the_spans_carry_arguments_result_and_output() {
    let sink = Sink::start().await;
    let app = spawn(format!("http://{}/v1/traces", sink.addr), true).await;
    start_run(&app, "r1", 1).await;
    approved_turn(&app, "r1", "toolu_1").await;
    let spans = sink.wait_for(3).await;
    let t = attrs(named(&spans, "execute_tool"));
    assert_eq!(
        serde_json::from_str::<Value>(t["gen_ai.tool.call.arguments"].as_str().unwrap()).unwrap(),
        json!({"env": "prod-secret-env"})
    );
    assert_eq!(t["input.value"], t["gen_ai.tool.call.arguments"]);
    assert!(t["output.value"].as_str().unwrap().contains("deployed"));
    let a = attrs(named(&spans, "invoke_agent"));
    assert_eq!(a["output.value"], "Deployed.");
    sink.task.abort();
}

#[tokio::test]
async fn a_collector_that_goes_away_costs_only_its_spans_counted_in_metrics() {
    let sink = Sink::start().await;
    let app = spawn(format!("http://{}", sink.addr), false).await;
    start_run(&app, "r1", 1).await;
    approved_turn(&app, "r1", "toolu_1").await;
    sink.wait_for(3).await;
    // The collector stops: its port refuses connections from now on.
    sink.task.abort();
    let _ = sink.task.await;
    start_run(&app, "r2", 2).await;
    // Every store and tool call of the second run still answers (approved_turn asserts it).
    approved_turn(&app, "r2", "toolu_2").await;
    let deadline = tokio::time::Instant::now() + T;
    let metrics = loop {
        let m = app
            .request("GET", "/metrics", &[], "", Framing::ContentLength)
            .await
            .text();
        if m.contains("callbackd_telemetry_spans_dropped_total 3") {
            break m;
        }
        assert!(tokio::time::Instant::now() < deadline, "{m}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        metrics.contains("callbackd_telemetry_spans_exported_total 3"),
        "{metrics}"
    );
    // The second run is stored whole all the same.
    let state = app.api_get("/v1/runs/r2").await.json();
    assert_eq!(state["tool_calls"][0]["outcome"], "ok", "{state}");
    assert_eq!(state["last_seq"], 7, "{state}");
    assert_eq!(sink.spans.lock().unwrap().len(), 3, "nothing more arrived");
}

#[tokio::test]
async fn a_malformed_header_in_the_config_is_a_startup_error_naming_the_key() {
    let mut config = callbackd::Config::default();
    config.server.listen = "127.0.0.1:0".into();
    let dir = tempfile::tempdir().unwrap();
    config.store.path = dir.path().join("db.sqlite");
    config.telemetry.enabled = true;
    config.telemetry.headers.insert(
        "x-api-key".into(),
        callbackd::secret::Secret::new("line\nbreak".into()),
    );
    let err = callbackd::App::build(config).await.err().expect("refused");
    let text = format!("{err:#}");
    assert!(text.contains("telemetry.headers.x-api-key"), "{text}");
    assert!(
        !text.contains("line\nbreak"),
        "the value is not shown: {text}"
    );
}

fn unix_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

#[tokio::test]
async fn a_run_across_a_daemon_restart_is_traced_from_its_stored_start() {
    let sink = Sink::start().await;
    let endpoint = format!("http://{}", sink.addr);
    // The first daemon exports nothing: the run starts there.
    let first = TestApp::spawn().await;
    start_run(&first, "r1", 1).await;
    let before = unix_nanos();
    append(
        &first,
        "r1",
        json!({"type": "request", "agent_id": "a1", "run_id": "r1", "request_id": "q1"}),
    )
    .await;
    append(&first, "r1", json!({"type": "status", "status": "RUNNING"})).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let stopped = unix_nanos();
    let dir = first.stop().await;
    let second = TestApp::spawn_in(dir, |c| c.telemetry.otlp_endpoint = Some(endpoint)).await;
    append(
        &second,
        "r1",
        json!({"type": "usage", "usage": {"inputTokens": 5, "outputTokens": 7}}),
    )
    .await;
    end_run(
        &second,
        "r1",
        "ERROR",
        Some("[unavailable] the model went away"),
    )
    .await;
    let spans = sink.wait_for(1).await;
    let agent = named(&spans, "invoke_agent");
    // Millisecond precision of the stored times.
    assert!(
        agent.start_time_unix_nano + 1_000_000 >= before && agent.start_time_unix_nano < stopped,
        "the span starts at the first stored event, before the restart"
    );
    assert!(agent.end_time_unix_nano > stopped);
    let a = attrs(agent);
    assert_eq!(a["gen_ai.usage.output_tokens"], 7);
    assert_eq!(a["callbackd.run.status"], "error");
    assert_eq!(
        a["callbackd.run.error"],
        "[unavailable] the model went away"
    );
    let status = agent.status.as_ref().unwrap();
    assert_eq!(status.message, "[unavailable] the model went away");
    sink.task.abort();
}
