//! `CallCustomTool` over HTTP: plugin, command and built-in tools, both codecs, validation,
//! result shapes, and the bounds (timeout, panic, concurrency, disconnect).

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use callbackd::config::{CommandToolConfig, Config};
use callbackd::tools::{BoxFuture, Tool, ToolContext, ToolError};
use callbackd::Namespace;
use prost::Message;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, Semaphore};

use crate::helpers::{Framing, Resp, TestApp, TOOL_PATH};

// ---- helpers ----

/// Generous bound for "returns promptly" (a 300 ms timeout on a loaded 2-core CI box).
const PROMPTLY: Duration = Duration::from_secs(10);

async fn call_raw(app: &TestApp, body: Value, extra: &[(&str, &str)]) -> Resp {
    let auth = format!("Bearer {}", app.tool_token);
    let mut headers = vec![
        ("content-type", "application/json"),
        ("connect-protocol-version", "1"),
        ("authorization", auth.as_str()),
    ];
    headers.extend_from_slice(extra);
    app.request(
        "POST",
        TOOL_PATH,
        &headers,
        body.to_string(),
        Framing::Chunked,
    )
    .await
}

/// CallCustomTool as the bridge sends it; returns `result` of a 200.
async fn call(app: &TestApp, tool: &str, args: Value) -> Value {
    let resp = call_raw(
        app,
        json!({"toolName": tool, "args": args, "toolCallId": "toolu_1", "agentId": "agent-1"}),
        &[],
    )
    .await;
    assert_eq!(resp.status, 200, "{tool}: {}", resp.text());
    assert_eq!(resp.content_type, "application/json");
    resp.json()["result"].clone()
}

/// The text of an error result, failing if the result is not one.
fn error_text(result: &Value) -> String {
    assert_eq!(
        result["isError"], true,
        "expected an error result: {result}"
    );
    result["content"][0]["text"].as_str().unwrap().to_string()
}

fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

async fn with_tools(tools: Vec<Arc<dyn Tool>>) -> TestApp {
    with_config_and_tools(|_| {}, tools).await
}

async fn with_config_and_tools(
    tweak: impl FnOnce(&mut Config),
    tools: Vec<Arc<dyn Tool>>,
) -> TestApp {
    let dir = tempfile::tempdir().unwrap();
    TestApp::spawn_built(dir, tweak, move |mut b| {
        for t in tools {
            b = b.tool_arc(t);
        }
        b
    })
    .await
}

fn command(name: &str, argv: &[&str]) -> CommandToolConfig {
    let text = format!(
        "name = {name:?}\nargv = [{}]\n",
        argv.iter()
            .map(|a| format!("{a:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    toml::from_str(&text).unwrap()
}

type CallFn =
    dyn Fn(Value, ToolContext) -> BoxFuture<'static, Result<Value, ToolError>> + Send + Sync;

/// A plugin tool defined by a closure over its arguments.
struct FnTool {
    name: &'static str,
    schema: Value,
    output: Option<Value>,
    timeout: Option<Duration>,
    limit: Option<usize>,
    f: Box<CallFn>,
}

impl FnTool {
    fn new(
        name: &'static str,
        f: impl Fn(Value, ToolContext) -> BoxFuture<'static, Result<Value, ToolError>>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        FnTool {
            name,
            schema: json!({"type": "object"}),
            output: None,
            timeout: None,
            limit: None,
            f: Box::new(f),
        }
    }
}

impl Tool for FnTool {
    fn name(&self) -> &str {
        self.name
    }
    fn input_schema(&self) -> Value {
        self.schema.clone()
    }
    fn output_schema(&self) -> Option<Value> {
        self.output.clone()
    }
    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
    fn max_concurrency(&self) -> Option<usize> {
        self.limit
    }
    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, Result<Value, ToolError>> {
        (self.f)(args, ctx)
    }
}

/// What the spy saw of one call.
#[derive(Debug, Clone)]
struct Seen {
    args: Value,
    agent_id: String,
    tool_call_id: Option<String>,
    namespace: Namespace,
}

/// A plugin tool that records its calls and answers `{"ok": true}`.
struct Spy {
    calls: Arc<Mutex<Vec<Seen>>>,
}

impl Tool for Spy {
    fn name(&self) -> &str {
        "spy"
    }
    fn description(&self) -> &str {
        "records its calls"
    }
    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
            "required": ["city"],
            "additionalProperties": false
        })
    }
    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, Result<Value, ToolError>> {
        self.calls.lock().unwrap().push(Seen {
            args,
            agent_id: ctx.agent_id.clone(),
            tool_call_id: ctx.tool_call_id.clone(),
            namespace: ctx.namespace.clone(),
        });
        Box::pin(async { Ok(json!({"ok": true})) })
    }
}

fn spy() -> (Arc<dyn Tool>, Arc<Mutex<Vec<Seen>>>) {
    let calls = Arc::new(Mutex::new(Vec::new()));
    (
        Arc::new(Spy {
            calls: calls.clone(),
        }),
        calls,
    )
}

/// Whether a process is still running (a zombie counts as gone: it runs nothing).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
    }
}

async fn wait_for_file(path: &std::path::Path) -> u32 {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Ok(pid) = text.trim().parse() {
                return pid;
            }
        }
        assert!(
            start.elapsed() < PROMPTLY,
            "{} never appeared",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_until_gone(pid: u32) {
    let start = Instant::now();
    while alive(pid) {
        assert!(start.elapsed() < PROMPTLY, "process {pid} is still running");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---- dispatch ----

#[tokio::test]
async fn a_plugin_tool_gets_the_args_and_the_call_context() {
    let (tool, calls) = spy();
    let app = with_tools(vec![tool]).await;

    let result = call(&app, "spy", json!({"city": "Paris", "days": 2})).await;

    assert_eq!(result, json!({"ok": true}));
    let seen = calls.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].args, json!({"city": "Paris", "days": 2}));
    assert_eq!(seen[0].agent_id, "agent-1");
    assert_eq!(seen[0].tool_call_id.as_deref(), Some("toolu_1"));
    assert_eq!(seen[0].namespace, Namespace::default());
}

#[tokio::test]
async fn the_proto_codec_carries_the_same_call() {
    let (tool, calls) = spy();
    let app = with_tools(vec![tool]).await;
    let req = callbackd::proto::CallCustomToolRequest {
        tool_name: "spy".into(),
        args: callbackd::rpc::codec::json_to_struct(&json!({"city": "Oslo"})),
        tool_call_id: None,
        agent_id: "agent-p".into(),
    };
    let auth = format!("Bearer {}", app.tool_token);

    let resp = app
        .request(
            "POST",
            TOOL_PATH,
            &[
                ("content-type", "application/proto"),
                ("authorization", &auth),
            ],
            req.encode_to_vec(),
            Framing::ContentLength,
        )
        .await;

    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.content_type, "application/proto");
    let out = callbackd::proto::CallCustomToolResponse::decode(resp.body.clone()).unwrap();
    let result = callbackd::rpc::codec::struct_to_json(&out.result.unwrap()).unwrap();
    assert_eq!(result, json!({"ok": true}));
    let seen = calls.lock().unwrap().clone();
    assert_eq!(seen[0].args, json!({"city": "Oslo"}));
    assert_eq!(seen[0].agent_id, "agent-p");
    assert_eq!(seen[0].tool_call_id, None);
}

#[tokio::test]
async fn proto_field_names_are_accepted_in_json() {
    let (tool, calls) = spy();
    let app = with_tools(vec![tool]).await;

    let resp = call_raw(
        &app,
        json!({"tool_name": "spy", "args": {"city": "Rome"}, "tool_call_id": "t9", "agent_id": "a9"}),
        &[],
    )
    .await;

    assert_eq!(resp.status, 200, "{}", resp.text());
    let seen = calls.lock().unwrap().clone();
    assert_eq!(
        (seen[0].agent_id.as_str(), seen[0].tool_call_id.as_deref()),
        ("a9", Some("t9"))
    );
}

#[tokio::test]
async fn an_unknown_tool_is_not_found_and_named() {
    let app = TestApp::spawn().await;

    let resp = call_raw(
        &app,
        json!({"toolName": "nope", "args": {}, "agentId": "a"}),
        &[],
    )
    .await;

    assert_eq!(resp.status, 404);
    assert_eq!(resp.code(), "not_found");
    assert!(resp.message().contains("\"nope\""), "{}", resp.message());
    assert!(
        resp.message().contains("echo"),
        "lists the served tools: {}",
        resp.message()
    );
}

#[tokio::test]
async fn malformed_requests_are_invalid_argument() {
    let app = TestApp::spawn().await;
    let cases = [
        (json!({"args": {}, "agentId": "a"}), "toolName is required"),
        (
            json!({"toolName": "", "args": {}, "agentId": "a"}),
            "toolName is required",
        ),
        (
            json!({"toolName": "echo", "args": {}}),
            "agentId is required",
        ),
        (
            json!({"toolName": "echo", "args": [1], "agentId": "a"}),
            "args must be a JSON object",
        ),
        (
            json!({"toolName": "echo", "args": "x", "agentId": "a"}),
            "args must be a JSON object",
        ),
        (
            json!({"toolName": 7, "args": {}, "agentId": "a"}),
            "toolName must be a string",
        ),
        (
            json!({"toolName": "echo", "toolCallId": 1, "agentId": "a"}),
            "toolCallId must be a string",
        ),
        // a misspelled field is named, not reported as the field it was meant to be missing
        (
            json!({"toolname": "echo", "args": {}, "agentId": "a"}),
            r#"unknown field "toolname" in sdk.v1.CallCustomToolRequest; did you mean "toolName"?"#,
        ),
        (
            json!({"toolName": "echo", "arguments": {}, "agentId": "a"}),
            r#"unknown field "arguments" in sdk.v1.CallCustomToolRequest: its fields are toolName, args, toolCallId, agentId"#,
        ),
    ];
    for (body, message) in cases {
        let resp = call_raw(&app, body.clone(), &[]).await;
        assert_eq!(resp.code(), "invalid_argument", "{body}");
        assert_eq!(resp.message(), message, "{body}");
    }
    let resp = call_raw(&app, json!([1]), &[]).await;
    assert_eq!(resp.code(), "invalid_argument");
}

#[tokio::test]
async fn absent_args_count_as_an_empty_object() {
    let app = TestApp::spawn().await;

    let resp = call_raw(&app, json!({"toolName": "echo", "agentId": "a"}), &[]).await;

    assert_eq!(resp.status, 200);
    assert_eq!(resp.json(), json!({"result": {}}));
}

#[tokio::test]
async fn arguments_that_break_the_schema_are_an_error_result_the_model_can_act_on() {
    let (tool, calls) = spy();
    let app = with_tools(vec![tool]).await;

    let missing = error_text(&call(&app, "spy", json!({"days": 2})).await);
    let wrong = error_text(&call(&app, "spy", json!({"city": 5, "days": 0, "x": 1})).await);

    assert!(
        missing.contains("missing required property \"city\""),
        "{missing}"
    );
    assert!(
        wrong.contains("/city: expected string, got number 5 (type)"),
        "{wrong}"
    );
    assert!(
        wrong.contains("/days: must be at least 1; got 0 (minimum)"),
        "{wrong}"
    );
    assert!(wrong.contains("unexpected property \"x\""), "{wrong}");
    assert!(calls.lock().unwrap().is_empty(), "the tool never ran");
}

// ---- results ----

#[tokio::test]
async fn results_are_shaped_by_their_type() {
    let answer = |name: &'static str, v: Value| -> Arc<dyn Tool> {
        Arc::new(FnTool::new(name, move |_, _| {
            let v = v.clone();
            Box::pin(async move { Ok(v) })
        }))
    };
    let mcp = json!({"content": [{"type": "text", "text": "hi"}], "isError": false});
    let app = with_tools(vec![
        answer("string", json!("hello")),
        answer("object", json!({"tempC": 21, "nested": {"a": [1, null]}})),
        answer("number", json!(42)),
        answer("boolean", json!(true)),
        answer("null", Value::Null),
        answer("mcp", mcp.clone()),
        Arc::new(FnTool::new("fails", |_, _| {
            Box::pin(async { Err(ToolError::failed("no such city")) })
        })),
    ])
    .await;

    assert_eq!(call(&app, "string", json!({})).await, text_result("hello"));
    assert_eq!(
        call(&app, "object", json!({})).await,
        json!({"tempC": 21, "nested": {"a": [1, null]}})
    );
    assert_eq!(call(&app, "number", json!({})).await, text_result("42"));
    assert_eq!(call(&app, "boolean", json!({})).await, text_result("true"));
    assert_eq!(call(&app, "null", json!({})).await, text_result("null"));
    assert_eq!(call(&app, "mcp", json!({})).await, mcp);
    assert_eq!(
        call(&app, "fails", json!({})).await,
        json!({"content": [{"type": "text", "text": "no such city"}], "isError": true})
    );
}

#[tokio::test]
async fn a_result_that_breaks_the_output_schema_is_an_error_result() {
    let mut good = FnTool::new("good", |_, _| Box::pin(async { Ok(json!({"tempC": 21})) }));
    good.output = Some(
        json!({"type": "object", "properties": {"tempC": {"type": "number"}}, "required": ["tempC"]}),
    );
    let mut bad = FnTool::new("bad", |_, _| {
        Box::pin(async { Ok(json!({"tempC": "warm"})) })
    });
    bad.output = good.output.clone();
    let app = with_tools(vec![Arc::new(good), Arc::new(bad)]).await;

    assert_eq!(call(&app, "good", json!({})).await, json!({"tempC": 21}));
    let text = error_text(&call(&app, "bad", json!({})).await);

    assert!(text.contains("does not match its output schema"), "{text}");
    assert!(text.contains("/tempC: expected number"), "{text}");
}

// ---- built-ins ----

#[tokio::test]
async fn echo_returns_large_nested_unicode_args_unchanged() {
    let app = TestApp::spawn().await;
    let big: Vec<Value> = (0..4000)
        .map(|i| json!({"i": i, "s": "ünïcödé ✓ 値", "f": 1.5, "n": null}))
        .collect();
    let args = json!({"text": "ping ✓", "nested": {"list": [1, 2.5, "drei", null, true, {"ключ": "値"}]}, "big": big});
    assert!(args.to_string().len() > 200 * 1024);

    assert_eq!(call(&app, "echo", args.clone()).await, args);
}

#[tokio::test]
async fn memory_notes_survive_a_restart_and_stay_per_agent() {
    let first = TestApp::spawn().await;
    let note = json!({"action": "set", "key": "plan", "value": "step 2: write tests ✓"});
    let saved = call(&first, "memory", note).await;
    assert_eq!(saved["saved"], true, "{saved}");
    let dir = first.stop().await;

    let second = TestApp::spawn_in(dir, |_| {}).await;
    let got = call(&second, "memory", json!({"action": "get", "key": "plan"})).await;
    let listed = call(&second, "memory", json!({"action": "list"})).await;
    let other_agent = call_raw(
        &second,
        json!({"toolName": "memory", "args": {"action": "get", "key": "plan"}, "agentId": "agent-2"}),
        &[],
    )
    .await
    .json()["result"]
        .clone();

    assert_eq!(got["found"], true, "{got}");
    assert_eq!(got["value"], "step 2: write tests ✓");
    assert_eq!(listed["count"], 1);
    assert_eq!(listed["notes"][0]["key"], "plan");
    assert_eq!(other_agent["found"], false, "{other_agent}");
}

#[tokio::test]
async fn memory_explains_what_an_action_is_missing() {
    let app = TestApp::spawn().await;

    let no_value = error_text(&call(&app, "memory", json!({"action": "set", "key": "k"})).await);
    let bad_action = error_text(&call(&app, "memory", json!({"action": "forget"})).await);

    assert!(no_value.contains("needs a \"value\""), "{no_value}");
    assert!(
        bad_action.contains("/action: must be one of"),
        "{bad_action}"
    );
}

#[tokio::test]
async fn disabled_builtins_are_not_served_or_exported() {
    let app = TestApp::spawn_with(|c| c.tools.disabled = vec!["memory".into()]).await;

    let resp = call_raw(
        &app,
        json!({"toolName": "memory", "args": {}, "agentId": "a"}),
        &[],
    )
    .await;

    assert_eq!(resp.code(), "not_found");
    let mut config = Config::default();
    config.tools.disabled = vec!["memory".into()];
    let decls = callbackd::App::builder(config).tool_declarations().unwrap();
    assert!(
        decls.get("memory").is_none() && decls.get("echo").is_some(),
        "{decls}"
    );
}

// ---- command tools ----

#[tokio::test]
async fn a_command_tool_reads_args_on_stdin_and_returns_stdout() {
    let app = TestApp::spawn_with(|c| {
        c.tools.command = vec![
            command("json_out", &["sh", "-c", "read line; printf '{\"got\":%s,\"agent\":\"%s\"}' \"$line\" \"$CALLBACKD_AGENT_ID\""]),
            command("text_out", &["sh", "-c", "cat >/dev/null; echo hello from sh"]),
            command("fails", &["sh", "-c", "echo 'something broke' >&2; exit 3"]),
        ];
    })
    .await;

    let json_out = call(&app, "json_out", json!({"n": [1, "✓"]})).await;
    let text_out = call(&app, "text_out", json!({})).await;
    let fails = error_text(&call(&app, "fails", json!({})).await);

    assert_eq!(
        json_out,
        json!({"got": {"n": [1, "✓"]}, "agent": "agent-1"})
    );
    assert_eq!(text_out, text_result("hello from sh"));
    assert!(fails.contains("exited with status 3"), "{fails}");
    assert!(fails.contains("something broke"), "{fails}");
}

#[tokio::test]
async fn a_relative_program_in_a_config_file_runs_from_next_to_it_whatever_its_cwd() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("work/bin")).unwrap();
    // The program: `pwd`, by a symlink (a script written here could hit ETXTBSY when a
    // sibling test forks while it is still open). A decoy of the same name in the cwd
    // must not be the one that runs.
    std::fs::create_dir(dir.path().join("bin")).unwrap();
    std::os::unix::fs::symlink("/bin/pwd", dir.path().join("bin/where")).unwrap();
    std::os::unix::fs::symlink("/bin/false", dir.path().join("work/bin/where")).unwrap();
    let path = dir.path().join("callbackd.toml");
    std::fs::write(
        &path,
        "[[tools.command]]\nname = \"where\"\nargv = [\"./bin/where\"]\ncwd = \"work\"\n",
    )
    .unwrap();
    let file = Config::from_file(&path).unwrap();
    let app = TestApp::spawn_with(|c| c.tools.command = file.tools.command).await;

    let out = call(&app, "where", json!({})).await;

    let work = dir.path().join("work").canonicalize().unwrap();
    assert_eq!(out, text_result(work.to_str().unwrap()), "{out}");
}

#[tokio::test]
async fn a_command_tool_that_cannot_start_is_an_error_result() {
    let app = TestApp::spawn_with(|c| {
        c.tools.command = vec![command("missing", &["/nonexistent/program"])];
    })
    .await;

    let text = error_text(&call(&app, "missing", json!({})).await);

    assert!(text.contains("could not start"), "{text}");
}

#[tokio::test]
async fn a_timed_out_command_tool_is_killed_with_its_children() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().to_path_buf();
    let app = TestApp::spawn_with(|c| {
        let mut tool = command(
            "slow",
            &[
                "sh",
                "-c",
                "sleep 60 & echo $! > \"$PIDS/child\"; echo $$ > \"$PIDS/sh\"; wait",
            ],
        );
        tool.env.insert("PIDS".into(), pids.display().to_string());
        // Long enough for `sh` to write both pid files on a loaded machine.
        tool.timeout_ms = Some(2000);
        c.tools.command = vec![tool];
    })
    .await;

    let started = Instant::now();
    let text = error_text(&call(&app, "slow", json!({})).await);

    assert!(started.elapsed() < PROMPTLY);
    assert!(text.contains("did not finish within 2000 ms"), "{text}");
    wait_until_gone(wait_for_file(&dir.path().join("sh")).await).await;
    wait_until_gone(wait_for_file(&dir.path().join("child")).await).await;
}

#[tokio::test]
async fn a_client_that_disconnects_cancels_the_call_and_kills_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().to_path_buf();
    let app = TestApp::spawn_with(|c| {
        let mut tool = command(
            "hang",
            &[
                "sh",
                "-c",
                "sleep 60 & echo $! > \"$PIDS/child\"; echo $$ > \"$PIDS/sh\"; wait",
            ],
        );
        tool.env.insert("PIDS".into(), pids.display().to_string());
        c.tools.command = vec![tool];
    })
    .await;
    let body = json!({"toolName": "hang", "args": {}, "agentId": "a"}).to_string();
    let request = format!(
        "POST {TOOL_PATH} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         authorization: Bearer {}\r\ncontent-length: {}\r\n\r\n{body}",
        app.tool_token,
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let sh = wait_for_file(&dir.path().join("sh")).await;
    let child = wait_for_file(&dir.path().join("child")).await;
    assert!(alive(sh) && alive(child));

    drop(stream);

    wait_until_gone(sh).await;
    wait_until_gone(child).await;
    assert_eq!(
        call(&app, "echo", json!({"still": "serving"})).await,
        json!({"still": "serving"})
    );
}

// ---- bounds ----

#[tokio::test]
async fn a_tool_past_its_timeout_is_cancelled_and_the_daemon_stays_responsive() {
    let cancelled = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = cancelled.clone();
    let mut sleepy = FnTool::new("sleepy", move |_, ctx| {
        let flag = flag.clone();
        let token = ctx.cancellation.clone();
        tokio::spawn(async move {
            token.cancelled().await;
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(json!("woke up"))
        })
    });
    sleepy.timeout = Some(Duration::from_millis(300));
    let app = with_tools(vec![Arc::new(sleepy)]).await;

    let started = Instant::now();
    let text = error_text(&call(&app, "sleepy", json!({})).await);

    assert!(started.elapsed() < PROMPTLY, "took {:?}", started.elapsed());
    assert!(text.contains("did not finish within 300 ms"), "{text}");
    assert_eq!(call(&app, "echo", json!({"a": 1})).await, json!({"a": 1}));
    let deadline = Instant::now() + PROMPTLY;
    while !cancelled.load(std::sync::atomic::Ordering::SeqCst) {
        assert!(
            Instant::now() < deadline,
            "the cancellation token never fired"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn tools_limits_in_the_config_override_a_plugins_own_limits() {
    let mut sleepy = FnTool::new("sleepy", |_, _| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(json!("woke up"))
        })
    });
    sleepy.timeout = Some(Duration::from_secs(60));
    let app = with_config_and_tools(
        |c| {
            c.tools.limits.insert(
                "sleepy".into(),
                callbackd::config::ToolLimitsConfig {
                    timeout_ms: Some(200),
                    ..Default::default()
                },
            );
        },
        vec![Arc::new(sleepy)],
    )
    .await;

    let started = Instant::now();
    let text = error_text(&call(&app, "sleepy", json!({})).await);

    assert!(started.elapsed() < PROMPTLY, "took {:?}", started.elapsed());
    assert!(text.contains("did not finish within 200 ms"), "{text}");
}

#[test]
fn tools_limits_for_a_tool_that_does_not_exist_are_a_startup_error() {
    let mut config = Config::default();
    config.tools.limits.insert(
        "memroy".into(),
        callbackd::config::ToolLimitsConfig {
            timeout_ms: Some(1000),
            ..Default::default()
        },
    );
    let err = callbackd::App::builder(config)
        .tool_declarations()
        .unwrap_err();
    let err = format!("{err:#}");
    assert!(
        err.contains("tools.limits names \"memroy\", but no tool has that name"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_blocks_its_thread_does_not_hold_up_store_calls() {
    let (started, finished) = (
        Arc::new(Semaphore::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let (s, f) = (started.clone(), finished.clone());
    let blocking = FnTool::new("blocks", move |_, _| {
        let (s, f) = (s.clone(), f.clone());
        Box::pin(async move {
            s.add_permits(1);
            // A badly written plugin: blocking I/O inside its future.
            std::thread::sleep(Duration::from_secs(3));
            f.store(true, SeqCst);
            Ok(json!({"done": true}))
        })
    });
    // One connection thread: the tool's connection and the store's share it.
    let app = with_config_and_tools(|c| c.server.threads = 1, vec![Arc::new(blocking)]).await;

    let (tool, store_done_first) = tokio::join!(call(&app, "blocks", json!({})), async {
        let _blocking = started.acquire().await.unwrap();
        app.store_ok("agents", "get", json!({"agentId": "a"})).await;
        !finished.load(SeqCst)
    });

    assert_eq!(tool, json!({"done": true}));
    assert!(
        store_done_first,
        "the store call was answered only after the blocked tool let go of its thread"
    );
}

#[tokio::test]
async fn a_tighter_connect_timeout_header_wins() {
    let sleepy = FnTool::new("sleepy", |_, _| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(json!("woke up"))
        })
    });
    let app = with_tools(vec![Arc::new(sleepy)]).await;

    let started = Instant::now();
    let resp = call_raw(
        &app,
        json!({"toolName": "sleepy", "args": {}, "agentId": "a"}),
        &[("connect-timeout-ms", "250")],
    )
    .await;

    assert!(started.elapsed() < PROMPTLY);
    assert_eq!(resp.status, 200);
    let text = error_text(&resp.json()["result"]);
    assert!(text.contains("did not finish within 250 ms"), "{text}");
}

#[tokio::test]
async fn a_panicking_tool_is_an_error_result_and_the_daemon_keeps_serving() {
    let in_future = FnTool::new("panics", |_, _| {
        Box::pin(async {
            tokio::task::yield_now().await;
            panic!("tool bug");
        })
    });
    let before_future = FnTool::new("panics_early", |_, _| panic!("eager tool bug"));
    let app = with_tools(vec![Arc::new(in_future), Arc::new(before_future)]).await;

    for name in ["panics", "panics_early"] {
        let text = error_text(&call(&app, name, json!({})).await);
        assert!(text.contains("panicked"), "{text}");
        assert!(
            !text.contains("tool bug"),
            "panic details stay in the log: {text}"
        );
    }
    assert_eq!(call(&app, "echo", json!({"ok": 1})).await, json!({"ok": 1}));
}

#[tokio::test]
async fn calls_beyond_the_concurrency_limit_wait_then_get_a_busy_result() {
    let gate = Arc::new(Semaphore::new(0));
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let g = gate.clone();
    let mut gated = FnTool::new("gated", move |_, _| {
        let gate = g.clone();
        let started = started_tx.clone();
        Box::pin(async move {
            let _ = started.send(());
            gate.acquire().await.unwrap().forget();
            Ok(json!({"done": true}))
        })
    });
    gated.limit = Some(1);
    let app = Arc::new(with_tools(vec![Arc::new(gated)]).await);
    let spawn_call =
        |app: Arc<TestApp>| tokio::spawn(async move { call(&app, "gated", json!({})).await });

    // The first call takes the only slot and holds it.
    let holder = spawn_call(app.clone());
    started.recv().await.unwrap();
    // A call with a 500 ms deadline waits for the slot that long, then gives up.
    let started_at = Instant::now();
    let resp = call_raw(
        &app,
        json!({"toolName": "gated", "args": {}, "agentId": "a"}),
        &[("connect-timeout-ms", "500")],
    )
    .await;
    let busy = error_text(&resp.json()["result"]);
    assert!(busy.contains("is busy"), "{busy}");
    assert!(busy.contains("1 calls"), "{busy}");
    assert!(
        started_at.elapsed() >= Duration::from_millis(450),
        "it waited for a slot first"
    );
    assert!(started_at.elapsed() < PROMPTLY);
    // A call without a deadline of its own waits until the slot is free.
    let waiter = spawn_call(app.clone());
    tokio::time::sleep(Duration::from_millis(100)).await;

    gate.add_permits(2);

    assert_eq!(holder.await.unwrap(), json!({"done": true}));
    assert_eq!(waiter.await.unwrap(), json!({"done": true}));
}

// ---- auth ----

#[tokio::test]
async fn the_tool_service_needs_the_tool_token() {
    let app = TestApp::spawn().await;
    let body = json!({"toolName": "echo", "args": {}, "agentId": "a"}).to_string();
    let store_auth = format!("Bearer {}", app.store_token);
    let cases: [&[(&str, &str)]; 4] = [
        &[("content-type", "application/json")],
        &[
            ("content-type", "application/json"),
            ("authorization", "Bearer wrong"),
        ],
        &[
            ("content-type", "application/json"),
            ("authorization", &store_auth),
        ],
        &[
            ("content-type", "application/json"),
            ("authorization", app.tool_token.as_str()),
        ],
    ];
    for headers in cases {
        let resp = app
            .request("POST", TOOL_PATH, headers, body.clone(), Framing::Chunked)
            .await;
        assert_eq!(resp.status, 401, "{headers:?}");
        assert_eq!(resp.code(), "unauthenticated");
    }
}

#[test]
fn a_schema_with_an_unsupported_keyword_behind_a_ref_stops_the_daemon_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("callbackd.toml");
    // The keyword sits in a member no keyword describes; only the $ref makes it a schema.
    std::fs::write(
        &config,
        r##"
[[tools.command]]
name = "lister"
argv = ["ls"]
input_schema = '{"type": "object", "x-shared": {"dir": {"type": "array", "contains": {"const": "/"}}}, "properties": {"dirs": {"$ref": "#/x-shared/dir"}}}'
"##,
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_callbackd"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .arg("--db")
        .arg(dir.path().join("db.sqlite"))
        .env("CALLBACKD_STORE_TOKEN", "t-store")
        .env("CALLBACKD_TOOL_TOKEN", "t-tool")
        .env("CALLBACKD_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run callbackd");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the daemon must not start: {stderr}");
    assert!(
        stderr.contains("\"#/x-shared/dir/contains\"") && stderr.contains("lister"),
        "names the tool and the keyword's pointer: {stderr}"
    );
    assert_eq!(
        stderr.matches("not supported").count(),
        1,
        "said once: {stderr}"
    );
    assert!(!stderr.contains("callbackd ready"), "{stderr}");
}
