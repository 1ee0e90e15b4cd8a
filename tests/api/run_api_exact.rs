//! Issue 20: every reader of a run gets the exact stream, and the run's state agrees with
//! it. Readers at different positions (one past the end) share a run's feed; the state of a
//! finished or failed run says what its stream's terminal event said; error codes.

use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::TestApp;
use crate::run_api::{append, setup, tool_turn};
use crate::sse::{durable, Sse};

const T: Duration = Duration::from_secs(10);

/// Reads until the stream's `up_to_date`, returning the durable frames before it.
async fn until_up_to_date(s: &mut Sse) -> Vec<(u64, String)> {
    let mut got = Vec::new();
    loop {
        let f = s.next(T).await.expect("the stream ended before up_to_date");
        if f.kind() == "up_to_date" {
            return durable(&got);
        }
        got.push(f);
    }
}

/// Events whose frames depend on what came before them: step indexes, a tool's duration,
/// usage and output.
fn stateful(n: usize) -> Vec<Value> {
    let mut out = vec![tool_turn()[0].clone()];
    for i in 1..n {
        out.push(match i % 4 {
            0 => json!({"type": "status", "status": "RUNNING"}),
            1 => json!({"type": "thinking", "text": format!("t{i}")}),
            2 => {
                json!({"type": "assistant", "message": {"content": [{"type": "text", "text": format!("a{i}")}]}})
            }
            _ => json!({"type": "usage", "usage": {"inputTokens": i, "outputTokens": 1, "cacheReadTokens": 0, "cacheWriteTokens": 0, "totalTokens": i + 1}}),
        });
    }
    out
}

#[tokio::test]
async fn a_reader_past_the_end_does_not_change_what_other_readers_get() {
    let app = TestApp::spawn().await;
    setup(&app, "r1", "running").await;
    let events = stateful(11);
    for m in &events[..5] {
        append(&app, "r1", m.clone()).await;
    }
    // A follows from the start, C from the middle; both have caught up with 1..5.
    let mut a = app.stream("r1", Some(0)).await;
    assert_eq!(until_up_to_date(&mut a).await.len(), 5);
    let mut c = app.stream("r1", Some(3)).await;
    assert_eq!(until_up_to_date(&mut c).await.len(), 2);
    // B asks for what follows seq 8, of which only 5 are stored; D sits at the end.
    let mut b = app.stream("r1", Some(8)).await;
    assert_eq!(b.status, 200);
    assert!(until_up_to_date(&mut b).await.is_empty());
    let mut d = app.stream("r1", Some(5)).await;
    assert!(until_up_to_date(&mut d).await.is_empty());
    for m in &events[5..] {
        append(&app, "r1", m.clone()).await;
    }
    append(&app, "r1", json!({"type": "status", "status": "FINISHED"})).await;
    let a_rest = durable(&a.collect(T).await);
    let b_all = durable(&b.collect(T).await);
    let c_rest = durable(&c.collect(T).await);
    let d_all = durable(&d.collect(T).await);
    // The replay of the finished run, by a reader on its own.
    let replay = durable(&app.stream("r1", Some(0)).await.collect(T).await);
    assert_eq!(replay.len(), 12);
    assert_eq!(a_rest, replay[5..], "A after 5");
    assert_eq!(c_rest, replay[5..], "C after 5");
    assert_eq!(d_all, replay[5..], "D after 5");
    assert_eq!(b_all, replay[8..], "B after 8");
}

#[tokio::test]
async fn a_finished_runs_state_says_what_its_completed_event_said() {
    let app = TestApp::spawn().await;
    setup(&app, "r1", "running").await;
    for m in tool_turn() {
        append(&app, "r1", m).await;
    }
    let frames = app.stream("r1", None).await.collect(T).await;
    let done = frames.last().unwrap().data().unwrap().clone();
    assert_eq!(done["type"], "completed");
    // The document still says running, with no result (the bridge updates it later).
    let state = app.api_get("/v1/runs/r1").await.json();
    assert_eq!(state["status"], "finished", "{state}");
    assert_eq!(state["output"], done["output"], "{state}");
    assert_eq!(state["usage"], done["usage"], "{state}");
    assert_eq!(state["error"], Value::Null);
    // The document says finished, with a result of its own: the stream decides.
    let mut r = crate::helpers::run("a1", "r1", 1);
    r["status"] = json!("finished");
    r["result"] = json!("something else");
    r["endedAt"] = json!(1_780_000_000_500i64);
    app.store_ok("runs", "update", json!({"run": r})).await;
    let state = app.api_get("/v1/runs/r1").await.json();
    assert_eq!(state["output"], done["output"], "{state}");
    let listed = app.api_get("/v1/sessions/a1/runs").await.json();
    assert_eq!(listed["runs"][0]["status"], "finished");
}

#[tokio::test]
async fn a_failed_runs_state_carries_the_problem_its_error_event_carried() {
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
    let err = frames.last().unwrap().data().unwrap().clone();
    assert_eq!(err["type"], "error");
    let state = app.api_get("/v1/runs/r1").await.json();
    assert_eq!(state["status"], "error", "{state}");
    assert_eq!(state["error"], err["problem"], "{state}");
    // cursor-sdk 1.1.0 stores only an error code in the document.
    let mut r = crate::helpers::run("a1", "r1", 1);
    r["status"] = json!("error");
    r["error"] = json!("resource_exhausted");
    app.store_ok("runs", "update", json!({"run": r})).await;
    let state = app.api_get("/v1/runs/r1").await.json();
    assert_eq!(state["error"], err["problem"], "{state}");
}

#[tokio::test]
async fn wrong_methods_and_missing_bodies_get_their_own_codes() {
    let app = TestApp::spawn().await;
    setup(&app, "r1", "finished").await;
    let token = app.api_token.clone();
    for (method, path) in [
        ("DELETE", "/v1/sessions"),
        ("PUT", "/v1/runs/r1"),
        ("GET", "/v1/runs/r1/cancel"),
    ] {
        let r = app.api(method, path, Some(&token), "").await;
        assert_eq!(r.status, 405, "{method} {path}: {}", r.text());
        assert_eq!(r.json()["code"], "method_not_allowed", "{method} {path}");
        assert_eq!(r.content_type, "application/problem+json");
    }
    // Bad input is judged before the missing bridge (400, not 501).
    let r = app.api("POST", "/v1/sessions", Some(&token), "").await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["code"], "invalid_argument");
    assert!(r.json()["detail"].as_str().unwrap().contains("body"));
    // A cancel needs no body; of a finished run it is 409, which the document lists.
    let r = app
        .api("POST", "/v1/runs/r1/cancel", Some(&token), "")
        .await;
    assert_eq!(r.status, 409, "{}", r.text());
    let doc = app.api_get("/v1/openapi.json").await.json();
    assert!(
        doc["paths"]["/v1/runs/{run_id}/cancel"]["post"]["responses"]["409"].is_object(),
        "409 of cancel is not documented"
    );
    assert!(
        doc["paths"]["/v1/sessions/{session_id}/messages"]["post"]["responses"]["409"].is_object()
    );
}

/// Schema positions (property values, array items) that say nothing: `{}` or `true`.
fn empty_schemas(v: &Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            for (k, child) in o {
                let here = format!("{at}/{k}");
                if k == "properties" {
                    for (name, s) in child.as_object().into_iter().flatten() {
                        if s == &json!({}) || s == &json!(true) {
                            out.push(format!("{here}/{name}"));
                        }
                    }
                }
                if k == "items" && (child == &json!({}) || child == &json!(true)) {
                    out.push(here.clone());
                }
                empty_schemas(child, &here, out);
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                empty_schemas(child, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[tokio::test]
async fn the_openapi_document_is_worth_generating_a_client_from() {
    let app = TestApp::spawn().await;
    let doc = app.api("GET", "/v1/openapi.json", None, "").await.json();
    let mut ids = std::collections::HashSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"].as_str();
            assert!(id.is_some(), "{method} {path} has no operationId");
            assert!(ids.insert(id.unwrap()), "operationId {id:?} twice");
        }
    }
    assert!(doc["paths"]["/v1/openapi.json"]["get"].is_object());
    assert!(doc["paths"]["/v1/runs/{run_id}/stream-token"]["post"].is_object());
    let mut empty = Vec::new();
    empty_schemas(&doc, "", &mut empty);
    assert!(empty.is_empty(), "fields without a schema: {empty:?}");
    // Every stream's answer describes each event (OpenAPI 3.2 `itemSchema`): its `data` is
    // JSON of the event union.
    for (path, op) in doc["paths"].as_object().unwrap() {
        for (method, op) in op.as_object().unwrap() {
            let Some(media) = op.pointer("/responses/200/content/text~1event-stream") else {
                continue;
            };
            let data = &media["itemSchema"]["properties"]["data"];
            assert_eq!(
                data["contentMediaType"], "application/json",
                "{method} {path}"
            );
            if path == "/v1/ag-ui" {
                // AG-UI's own events, each named by its `type`.
                assert_eq!(
                    data["contentSchema"]["required"],
                    json!(["type"]),
                    "{method} {path}"
                );
            } else {
                assert_eq!(
                    data["contentSchema"]["$ref"], "#/components/schemas/StreamEvent",
                    "{method} {path}"
                );
            }
            assert!(
                media.get("schema").is_none(),
                "{method} {path}: schema would cover the whole stream"
            );
        }
    }
    let codes = doc["components"]["schemas"]["ProblemCode"].to_string();
    assert!(codes.contains("method_not_allowed"), "{codes}");
}

#[tokio::test]
async fn a_session_status_is_an_enum_in_the_document_and_in_the_answers() {
    let app = TestApp::spawn().await;
    let doc = app.api("GET", "/v1/openapi.json", None, "").await.json();
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["SessionStatus"]["enum"],
        json!(["idle", "running", "error", "archived"]),
        "{}",
        schemas["SessionStatus"]
    );
    let status = schemas["Session"]["properties"]["status"].to_string();
    assert!(
        status.contains("#/components/schemas/SessionStatus"),
        "{status}"
    );
    // Each value a store document can hold comes out as itself; one this version does not
    // know comes out as null (never a string the document does not list).
    for (i, s) in ["idle", "running", "error", "archived", "hibernating"]
        .iter()
        .enumerate()
    {
        let id = format!("s{i}");
        let mut a = crate::helpers::agent(&id, "/ws", 1_780_000_000_000);
        a["status"] = json!(s);
        app.store_ok("agents", "create", json!({"agent": a})).await;
        let got = app.api_get(&format!("/v1/sessions/{id}")).await.json();
        let want = if *s == "hibernating" {
            Value::Null
        } else {
            json!(s)
        };
        assert_eq!(got["status"], want, "{got}");
    }
}
