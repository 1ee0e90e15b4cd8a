//! The hostile client across namespaces (issue 12, docs/namespaces.md "Isolation"): a daemon
//! with two namespaces `a` and `b`; b holds agents, runs, events, checkpoints, a memory
//! note and a tool call waiting for a person's approval; then a's tokens send the hostile cases and forgeries aimed at b's ids (every store
//! call on b's agent, run and blob ids, deletes with an empty filter, appends to b's run, the
//! memory tool on b's agent, the run API on b's sessions, runs and pending approval), and b's tokens are
//! presented to the services they do not belong to.
//!
//! Asserted: each forgery of a is answered exactly as the same request for an id that exists
//! nowhere (same status, same body once the id and timestamps are masked), the run API's
//! with 404; no answer to a ever carries b's data; every wrong-service token is 401; and
//! afterwards every row of namespace b in the database, and what b reads through its own
//! tokens, is byte-identical to before.
//!
//! `CALLBACKD_HOSTILE_REQUESTS` sets the size of the storm (default 10,000).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::Mutex;

use crate::daemon::{self, Daemon, Reply, Req};
use crate::hostile::{self, Case};

/// In every document b stores, and in nothing else: an answer to a that contains it leaked.
const MARK: &str = "b-private-7c1e2f";

struct Ns {
    name: &'static str,
    store: &'static str,
    tool: &'static str,
    api: &'static str,
    api_read: &'static str,
}

const A: Ns = Ns {
    name: "a",
    store: "xns-a-store-0f3e6d1c9b8a7f6e5d4c3b2a",
    tool: "xns-a-tool-1e2d3c4b5a6f7e8d9c0b1a2f",
    api: "xns-a-api-2d3c4b5a6f7e8d9c0b1a2f3e",
    api_read: "xns-a-apiread-3c4b5a6f7e8d9c0b1a2f3e4d",
};

const B: Ns = Ns {
    name: "b",
    store: "xns-b-store-4b5a6f7e8d9c0b1a2f3e4d5c",
    tool: "xns-b-tool-5a6f7e8d9c0b1a2f3e4d5c6b",
    api: "xns-b-api-6f7e8d9c0b1a2f3e4d5c6b7a",
    api_read: "xns-b-apiread-7e8d9c0b1a2f3e4d5c6b7a8f",
};

/// A command tool every call of which waits for a person (b's call of it stays pending
/// for the whole test).
const HELD_TOOL: &str = r#"
[[tools.command]]
name = "deploy"
description = "Deploys"
argv = ["sh", "-c", "echo '{}'"]
input_schema = { type = "object", properties = { env = { type = "string" } } }
approval = "always"
"#;

fn namespaces_toml() -> String {
    let namespaces: String = [A, B]
        .iter()
        .map(|n| {
            format!(
                "\n[[namespaces]]\nname = \"{}\"\nstore_token = \"{}\"\ntool_token = \"{}\"\n\
                 api_token = \"{}\"\napi_read_token = \"{}\"\n",
                n.name, n.store, n.tool, n.api, n.api_read
            )
        })
        .collect();
    format!("{HELD_TOOL}{namespaces}")
}

// b's ids. Each has a ghost of the same length that exists in no namespace.
const AGENT: &str = "agent-b1";
const AGENT2: &str = "agent-b2";
const RUN: &str = "run-b1";
const RUN2: &str = "run-b2";
const BLOB: &str = "blob-b1";
const GHOST_AGENT: &str = "agent-g1";
const GHOST_RUN: &str = "run-g1";
const GHOST_BLOB: &str = "blob-g1";
/// The id of b's pending approval (made by the daemon: known once b's call is held), and a
/// ghost of its shape.
static APPROVAL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
const GHOST_APPROVAL: &str = "appr_0000000000000000";

fn agent_doc(id: &str, run: Option<&str>, updated: i64) -> Value {
    json!({"agentId": id, "cwd": "/b-ws", "status": "running", "activeRunId": run,
           "name": format!("{MARK} {id}"), "createdAt": 1_780_000_000_000i64,
           "updatedAt": updated})
}

fn run_doc(agent: &str, run: &str, status: &str) -> Value {
    json!({"runId": run, "agentId": agent, "turnNumber": 1, "status": status,
           "model": {"id": "composer-1"}, "result": format!("{MARK} result"),
           "createdAt": 1_780_000_000_000i64, "updatedAt": 1_780_000_000_100i64})
}

fn event(run: &str, i: u64) -> Value {
    json!({"runId": run, "eventType": "run_stream_event", "payload": {
        "schemaVersion": 1, "type": "sdk_message", "agentId": AGENT, "runId": run,
        "message": {"type": "assistant", "message": {"role": "assistant",
            "content": [{"type": "text", "text": format!("{MARK} event {i}")}]}}}})
}

/// b's data, written through b's own tokens.
async fn fill_b(d: &Daemon) {
    let t = B.store;
    d.ok_as(
        t,
        "agents",
        "create",
        json!({"agent": agent_doc(AGENT, Some(RUN), 5)}),
    )
    .await;
    d.ok_as(
        t,
        "agents",
        "create",
        json!({"agent": agent_doc(AGENT2, None, 4)}),
    )
    .await;
    d.ok_as(
        t,
        "runs",
        "create",
        json!({"run": run_doc(AGENT, RUN, "running")}),
    )
    .await;
    d.ok_as(
        t,
        "runs",
        "create",
        json!({"run": run_doc(AGENT2, RUN2, "finished")}),
    )
    .await;
    for i in 0..5 {
        d.ok_as(t, "runEvents", "append", event(RUN, i)).await;
    }
    for i in 0..3 {
        d.ok_as(t, "runEvents", "append", event(RUN2, i)).await;
    }
    // The bytes of MARK, base64.
    let data = "Yi1wcml2YXRlLTdjMWUyZg==";
    for (agent, blob) in [(AGENT, BLOB), (AGENT2, "blob-b2")] {
        d.ok_as(
            t,
            "checkpoints",
            "create",
            json!({"agentId": agent, "blobId": blob, "data": data}),
        )
        .await;
    }
    let note = d
        .tool_as(
            B.tool,
            "memory",
            AGENT,
            json!({"action": "set", "key": "plan", "value": format!("{MARK} plan")}),
        )
        .await;
    assert!(
        note.status == 200 && !note.text().contains("\"isError\":true"),
        "b's memory set: {} {}",
        note.status,
        note.text()
    );
}

/// b's bridge calls the held tool on its agent (whose active run is [`RUN`]): the call
/// waits, on a connection of its own, until b decides it. Returns the call's task and sets
/// [`APPROVAL`] once the approval is listed to b.
async fn hold_b_call(d: &Daemon) -> tokio::task::JoinHandle<Option<Reply>> {
    let body = json!({"toolName": "deploy", "agentId": AGENT, "toolCallId": "toolu_b1",
                      "args": {"env": format!("{MARK} prod")}})
    .to_string();
    let bytes = Req::tool(body.as_bytes(), B.tool).build();
    let addr = d.addr;
    let call = tokio::spawn(async move {
        let mut c = daemon::Conn::open(addr).await.expect("connect");
        c.send(&bytes).await.expect("b's held call")
    });
    for _ in 0..500 {
        let listed = d.api_as(B.api, "GET", "/v1/approvals", None).await;
        let v: Value = serde_json::from_slice(&listed.body).expect("approvals list");
        if let Some(id) = v["approvals"][0]["id"].as_str() {
            assert_eq!(v["approvals"][0]["run_id"], RUN, "{v}");
            assert_eq!(
                id.len(),
                GHOST_APPROVAL.len(),
                "the ghost has b's shape: {id}"
            );
            APPROVAL.set(id.to_string()).expect("one held call");
            return call;
        }
        assert!(!call.is_finished(), "b's call was not held");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("b's call never showed as pending");
}

/// What b reads of its data through its own store and API tokens, every answer whole. (Not
/// the memory tool: each call of it adds a tool call record; the notes are in the rows.)
async fn view_b(d: &Daemon) -> Vec<(String, u16, String)> {
    let mut out = Vec::new();
    let store: Vec<(&str, &str, Value)> = vec![
        ("agents", "list", json!({"filter": {}})),
        ("agents", "get", json!({"agentId": AGENT})),
        ("agents", "get", json!({"agentId": AGENT2})),
        ("runs", "list", json!({"filter": {}})),
        ("runs", "get", json!({"agentId": AGENT, "runId": RUN})),
        ("runs", "get", json!({"agentId": AGENT2, "runId": RUN2})),
        ("runEvents", "list", json!({"runId": RUN})),
        ("runEvents", "list", json!({"runId": RUN2})),
        ("checkpoints", "list", json!({"filter": {}})),
        (
            "checkpoints",
            "get",
            json!({"agentId": AGENT, "blobId": BLOB}),
        ),
        (
            "checkpoints",
            "get",
            json!({"agentId": AGENT2, "blobId": "blob-b2"}),
        ),
    ];
    for (substore, method, input) in store {
        let r = d.call_as(B.store, substore, method, input.clone()).await;
        out.push((format!("{substore}.{method} {input}"), r.status, r.text()));
    }
    for path in [
        "/v1/sessions".to_string(),
        format!("/v1/sessions/{AGENT}"),
        format!("/v1/sessions/{AGENT}/runs"),
        format!("/v1/runs/{RUN}"),
        format!("/v1/runs/{RUN}/events"),
        format!("/v1/runs/{RUN2}/events"),
        "/v1/approvals".to_string(),
        "/v1/approvals?state=all".to_string(),
    ] {
        let r = d.api_as(B.api, "GET", &path, None).await;
        out.push((format!("GET {path}"), r.status, r.text()));
    }
    for (what, status, text) in &out {
        assert_eq!(*status, 200, "b reads its own {what}: {text}");
    }
    assert!(
        out.iter()
            .filter(|(_, _, text)| text.contains(MARK))
            .count()
            >= 10,
        "b's own reads do not show its data: {out:#?}"
    );
    out
}

/// Builds a request's bytes for a set of ids.
type Make = Box<dyn Fn(&Ids) -> Vec<u8> + Send + Sync>;

/// A request with its name and, when it has one, the status it must get.
type Checked = (String, Vec<u8>, Option<u16>);

/// A request of a's, sent once with b's ids and once with the ghost ids.
struct Forgery {
    name: &'static str,
    make: Make,
    /// The API's: must be 404 (the store's answer for a missing id varies by method).
    api: bool,
}

#[derive(Clone, Copy)]
struct Ids {
    agent: &'static str,
    run: &'static str,
    blob: &'static str,
    approval: &'static str,
}

/// b's ids (once b's call is held: [`hold_b_call`]).
fn b_ids() -> Ids {
    Ids {
        agent: AGENT,
        run: RUN,
        blob: BLOB,
        approval: APPROVAL.get().expect("b's call is held"),
    }
}

const GHOST_IDS: Ids = Ids {
    agent: GHOST_AGENT,
    run: GHOST_RUN,
    blob: GHOST_BLOB,
    approval: GHOST_APPROVAL,
};

fn store_req(substore: &str, method: &str, input: &Value) -> Vec<u8> {
    let body = json!({"substore": substore, "method": method, "input": input}).to_string();
    Req::store_as(body.as_bytes(), A.store).build()
}

fn memory_req(agent: &str, args: &Value) -> Vec<u8> {
    let body = json!({"toolName": "memory", "agentId": agent, "args": args}).to_string();
    Req::tool(body.as_bytes(), A.tool).build()
}

fn api_req(method: &'static str, path: &str, body: Option<Value>) -> Vec<u8> {
    Req::api(method, path, A.api, body).build()
}

/// A GET with a's read-only API token.
fn api_read_forgery(
    name: &'static str,
    path: impl Fn(&Ids) -> String + Send + Sync + 'static,
) -> Forgery {
    Forgery {
        name,
        make: Box::new(move |ids| Req::api("GET", &path(ids), A.api_read, None).build()),
        api: true,
    }
}

fn store_forgery(
    name: &'static str,
    substore: &'static str,
    method: &'static str,
    input: impl Fn(&Ids) -> Value + Send + Sync + 'static,
) -> Forgery {
    Forgery {
        name,
        make: Box::new(move |ids| store_req(substore, method, &input(ids))),
        api: false,
    }
}

fn memory_forgery(name: &'static str, args: Value) -> Forgery {
    Forgery {
        name,
        make: Box::new(move |ids| memory_req(ids.agent, &args)),
        api: false,
    }
}

fn api_forgery(
    name: &'static str,
    method: &'static str,
    path: impl Fn(&Ids) -> String + Send + Sync + 'static,
    body: Option<Value>,
) -> Forgery {
    Forgery {
        name,
        make: Box::new(move |ids| api_req(method, &path(ids), body.clone())),
        api: true,
    }
}

/// Forgeries that read, or change nothing even in a (a holds none of these ids yet). Sent
/// before [`writing_forgeries`], which create a's own records under b's ids.
fn reading_forgeries() -> Vec<Forgery> {
    vec![
        store_forgery(
            "agents.get b's agent",
            "agents",
            "get",
            |i| json!({"agentId": i.agent}),
        ),
        store_forgery(
            "agents.list b's agent id",
            "agents",
            "list",
            |i| json!({"filter": {"agentIds": [i.agent]}}),
        ),
        store_forgery(
            "runs.get b's run",
            "runs",
            "get",
            |i| json!({"agentId": i.agent, "runId": i.run}),
        ),
        store_forgery(
            "runs.list b's run id",
            "runs",
            "list",
            |i| json!({"filter": {"runIds": [i.run]}}),
        ),
        store_forgery(
            "runs.list b's agent id",
            "runs",
            "list",
            |i| json!({"filter": {"agentIds": [i.agent]}}),
        ),
        store_forgery(
            "runEvents.list b's run",
            "runEvents",
            "list",
            |i| json!({"runId": i.run}),
        ),
        store_forgery(
            "runEvents.list b's run after 2",
            "runEvents",
            "list",
            |i| json!({"runId": i.run, "afterOffset": "2", "limit": 1}),
        ),
        store_forgery(
            "checkpoints.get b's blob",
            "checkpoints",
            "get",
            |i| json!({"agentId": i.agent, "blobId": i.blob}),
        ),
        store_forgery(
            "checkpoints.list b's blob id",
            "checkpoints",
            "list",
            |i| json!({"filter": {"blobIds": [i.blob]}}),
        ),
        store_forgery(
            "checkpoints.list b's agent id",
            "checkpoints",
            "list",
            |i| json!({"filter": {"agentIds": [i.agent]}}),
        ),
        store_forgery(
            "agents.update b's agent",
            "agents",
            "update",
            |i| json!({"agent": {"agentId": i.agent, "cwd": "/a-ws", "updatedAt": 9}}),
        ),
        store_forgery(
            "runs.update b's run",
            "runs",
            "update",
            |i| json!({"run": {"agentId": i.agent, "runId": i.run, "turnNumber": 1, "status": "cancelled"}}),
        ),
        store_forgery(
            "agents.delete b's agent",
            "agents",
            "delete",
            |i| json!({"filter": {"agentIds": [i.agent]}}),
        ),
        store_forgery(
            "runs.delete b's run",
            "runs",
            "delete",
            |i| json!({"filter": {"runIds": [i.run]}}),
        ),
        store_forgery(
            "runs.delete b's agent's runs",
            "runs",
            "delete",
            |i| json!({"filter": {"agentIds": [i.agent]}}),
        ),
        store_forgery(
            "runEvents.delete b's run",
            "runEvents",
            "delete",
            |i| json!({"filter": {"runIds": [i.run]}}),
        ),
        store_forgery(
            "checkpoints.delete b's blob",
            "checkpoints",
            "delete",
            |i| json!({"filter": {"blobIds": [i.blob]}}),
        ),
        store_forgery(
            "checkpoints.delete b's agent's blobs",
            "checkpoints",
            "delete",
            |i| json!({"filter": {"agentIds": [i.agent]}}),
        ),
        memory_forgery(
            "memory get of b's note",
            json!({"action": "get", "key": "plan"}),
        ),
        memory_forgery("memory list of b's notes", json!({"action": "list"})),
        memory_forgery(
            "memory delete of b's note",
            json!({"action": "delete", "key": "plan"}),
        ),
        api_forgery(
            "GET b's session",
            "GET",
            |i| format!("/v1/sessions/{}", i.agent),
            None,
        ),
        api_forgery(
            "GET b's session's runs",
            "GET",
            |i| format!("/v1/sessions/{}/runs", i.agent),
            None,
        ),
        api_forgery(
            "GET b's run",
            "GET",
            |i| format!("/v1/runs/{}", i.run),
            None,
        ),
        api_forgery(
            "GET b's run's events",
            "GET",
            |i| format!("/v1/runs/{}/events", i.run),
            None,
        ),
        api_forgery(
            "GET b's run's events after 2",
            "GET",
            |i| format!("/v1/runs/{}/events?after=2", i.run),
            None,
        ),
        api_forgery(
            "stream b's run",
            "GET",
            |i| format!("/v1/runs/{}/stream", i.run),
            None,
        ),
        api_forgery(
            "stream b's run after 1",
            "GET",
            |i| format!("/v1/runs/{}/stream?after=1", i.run),
            None,
        ),
        api_read_forgery("GET b's session, read-only token", |i| {
            format!("/v1/sessions/{}", i.agent)
        }),
        api_read_forgery("GET b's run, read-only token", |i| {
            format!("/v1/runs/{}", i.run)
        }),
        api_read_forgery("GET b's run's events, read-only token", |i| {
            format!("/v1/runs/{}/events", i.run)
        }),
        api_read_forgery("stream b's run, read-only token", |i| {
            format!("/v1/runs/{}/stream", i.run)
        }),
        api_forgery(
            "cancel b's run",
            "POST",
            |i| format!("/v1/runs/{}/cancel", i.run),
            None,
        ),
        api_forgery(
            "message to b's session",
            "POST",
            |i| format!("/v1/sessions/{}/messages", i.agent),
            Some(json!({"text": "hello"})),
        ),
        api_forgery(
            "approve b's pending approval",
            "POST",
            |i| format!("/v1/approvals/{}", i.approval),
            Some(json!({"decision": "approve"})),
        ),
        api_forgery(
            "deny b's pending approval",
            "POST",
            |i| format!("/v1/approvals/{}", i.approval),
            Some(json!({"decision": "deny", "reason": "a's"})),
        ),
    ]
}

/// Forgeries that write into a's own namespace under b's ids (allowed: equal ids in two
/// namespaces never meet), answered as for the ghost ids.
fn writing_forgeries() -> Vec<Forgery> {
    vec![
        store_forgery(
            "runEvents.append to b's run",
            "runEvents",
            "append",
            |i| json!({"runId": i.run, "eventType": "e", "payload": {"from": "a"}}),
        ),
        store_forgery(
            "runEvents.append to b's run, idempotent",
            "runEvents",
            "append",
            |i| json!({"runId": i.run, "eventType": "e", "payload": {"from": "a"}, "idempotencyKey": "k1"}),
        ),
        store_forgery(
            "agents.create with b's agent id",
            "agents",
            "create",
            |i| json!({"agent": {"agentId": i.agent, "cwd": "/a-ws", "updatedAt": 9, "name": "a's"}}),
        ),
        store_forgery(
            "runs.create with b's run id",
            "runs",
            "create",
            |i| json!({"run": {"agentId": i.agent, "runId": i.run, "turnNumber": 1, "status": "running"}}),
        ),
        store_forgery(
            "checkpoints.create with b's blob id",
            "checkpoints",
            "create",
            |i| json!({"agentId": i.agent, "blobId": i.blob, "data": "YSdz"}),
        ),
        memory_forgery(
            "memory set of b's note",
            json!({"action": "set", "key": "plan", "value": "a's plan"}),
        ),
        memory_forgery(
            "memory get of b's note, after a's set",
            json!({"action": "get", "key": "plan"}),
        ),
        store_forgery(
            "agents.get b's agent id, after a's create",
            "agents",
            "get",
            |i| json!({"agentId": i.agent}),
        ),
        store_forgery(
            "runEvents.list b's run, after a's appends",
            "runEvents",
            "list",
            |i| json!({"runId": i.run}),
        ),
        api_forgery(
            "GET b's session id, after a's create",
            "GET",
            |i| format!("/v1/sessions/{}", i.agent),
            None,
        ),
        api_forgery(
            "GET b's run id, after a's create",
            "GET",
            |i| format!("/v1/runs/{}", i.run),
            None,
        ),
    ]
}

/// Requests that need no ghost: deletes of everything a has, b's tokens on the wrong
/// service, a's on the wrong service. With what each must be answered.
fn blanket_requests() -> Vec<(&'static str, Vec<u8>, Option<u16>)> {
    let delete_all = |substore: &str| store_req(substore, "delete", &json!({"filter": {}}));
    let b_store = |token: &str| {
        Req::store_as(
            br#"{"substore":"agents","method":"delete","input":{"filter":{}}}"#,
            token,
        )
        .build()
    };
    let b_tool = |token: &str| {
        let body = json!({"toolName": "memory", "agentId": AGENT,
                          "args": {"action": "delete", "key": "plan"}})
        .to_string();
        Req::tool(body.as_bytes(), token).build()
    };
    let b_api =
        |token: &str| Req::api("POST", &format!("/v1/runs/{RUN}/cancel"), token, None).build();
    let b_api_get = |token: &str| Req::api("GET", "/v1/sessions", token, None).build();
    vec![
        (
            "agents.delete with an empty filter",
            delete_all("agents"),
            None,
        ),
        ("runs.delete with an empty filter", delete_all("runs"), None),
        (
            "runEvents.delete with an empty filter",
            delete_all("runEvents"),
            None,
        ),
        (
            "checkpoints.delete with an empty filter",
            delete_all("checkpoints"),
            None,
        ),
        (
            "agents.list everything",
            store_req("agents", "list", &json!({"filter": {}})),
            None,
        ),
        (
            "runs.list everything",
            store_req("runs", "list", &json!({"filter": {}})),
            None,
        ),
        (
            "checkpoints.list everything",
            store_req("checkpoints", "list", &json!({"filter": {}})),
            None,
        ),
        (
            "GET /v1/sessions",
            api_req("GET", "/v1/sessions", None),
            None,
        ),
        (
            "GET /v1/approvals",
            api_req("GET", "/v1/approvals", None),
            None,
        ),
        (
            "GET /v1/approvals?state=all",
            api_req("GET", "/v1/approvals?state=all", None),
            None,
        ),
        ("b's tool token on the store", b_store(B.tool), Some(401)),
        ("b's API token on the store", b_store(B.api), Some(401)),
        (
            "b's read-only API token on the store",
            b_store(B.api_read),
            Some(401),
        ),
        ("b's store token on the tools", b_tool(B.store), Some(401)),
        ("b's API token on the tools", b_tool(B.api), Some(401)),
        ("b's store token on the run API", b_api(B.store), Some(401)),
        ("b's tool token on the run API", b_api(B.tool), Some(401)),
        (
            "b's store token listing sessions",
            b_api_get(B.store),
            Some(401),
        ),
        ("a's tool token on the store", b_store(A.tool), Some(401)),
        ("a's API token on the store", b_store(A.api), Some(401)),
        ("a's store token on the run API", b_api(A.store), Some(401)),
        (
            "a's read-only API token cancelling b's run",
            Req::api("POST", &format!("/v1/runs/{RUN}/cancel"), A.api_read, None).build(),
            None,
        ),
    ]
}

/// An answer with its ids and timestamps masked, for comparing a forgery with its ghost.
fn masked(reply: &Reply, ids: &Ids) -> (u16, String) {
    let mut text = reply.text();
    for (id, mask) in [
        (ids.agent, "<AGENT>"),
        (ids.run, "<RUN>"),
        (ids.blob, "<BLOB>"),
        (ids.approval, "<APPROVAL>"),
    ] {
        text = text.replace(id, mask);
    }
    let text = match serde_json::from_str::<Value>(&text) {
        Ok(mut v) => {
            mask_times(&mut v);
            v.to_string()
        }
        Err(_) => text,
    };
    (reply.status, text)
}

/// Zeroes every `...At` number, also inside strings holding JSON (a tool's text result).
fn mask_times(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (k, x) in map.iter_mut() {
                if k.ends_with("At") && x.is_number() {
                    *x = json!(0);
                } else {
                    mask_times(x);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(mask_times),
        Value::String(s) => {
            if let Ok(mut inner) = serde_json::from_str::<Value>(s) {
                if inner.is_object() || inner.is_array() {
                    mask_times(&mut inner);
                    *s = inner.to_string();
                }
            }
        }
        _ => {}
    }
}

/// A server fault: 500, or an `internal`/`unknown`/`data_loss` code. (501 and 503 are not:
/// the run API's answers when a namespace has no bridge attached.)
fn fault(reply: &Reply) -> bool {
    let code = serde_json::from_slice::<Value>(&reply.body)
        .ok()
        .and_then(|v| v.get("code").and_then(Value::as_str).map(str::to_string));
    reply.status == 500 || matches!(code.as_deref(), Some("internal" | "unknown" | "data_loss"))
}

/// b's data must never be in an answer to a.
fn leaks(reply: &Reply) -> bool {
    reply.body.windows(MARK.len()).any(|w| w == MARK.as_bytes())
        || reply.text().contains("Yi1wcml2YXRlLTdjMWUyZg")
}

/// Sends each forgery with b's ids and with the ghost ids; both answers must be the same.
async fn differential(d: &Daemon, forgeries: &[Forgery], failures: &mut Vec<String>) {
    for f in forgeries {
        let forged = send(d, &(f.make)(&b_ids())).await;
        let ghost = send(d, &(f.make)(&GHOST_IDS)).await;
        let (forged, ghost) = match (forged, ghost) {
            (Ok(f), Ok(g)) => (f, g),
            (f2, g) => {
                failures.push(format!("{}: no answer: {f2:?} / ghost {g:?}", f.name));
                continue;
            }
        };
        if std::env::var_os("CALLBACKD_HOSTILE_VERBOSE").is_some() {
            eprintln!("{:<50} {} {:.160}", f.name, forged.status, forged.text());
        }
        if leaks(&forged) {
            failures.push(format!(
                "{}: answered with b's data: {}",
                f.name,
                forged.text()
            ));
        }
        if masked(&forged, &b_ids()) != masked(&ghost, &GHOST_IDS) {
            failures.push(format!(
                "{}: answered unlike an id that does not exist: {} {} / for the ghost: {} {}",
                f.name,
                forged.status,
                forged.text(),
                ghost.status,
                ghost.text()
            ));
        }
        if f.api && forged.status != 404 && !f.name.contains("after a's create") {
            failures.push(format!(
                "{}: expected 404, got {} {}",
                f.name,
                forged.status,
                forged.text()
            ));
        }
        if fault(&forged) {
            failures.push(format!("{}: a server fault: {}", f.name, forged.text()));
        }
    }
}

/// One request on a fresh connection, with a deadline (a stream that opened would not end).
async fn send(d: &Daemon, bytes: &[u8]) -> Result<Reply, String> {
    let addr = d.addr;
    let bytes = bytes.to_vec();
    tokio::time::timeout(Duration::from_secs(10), async move {
        let mut c = daemon::Conn::open(addr).await.map_err(|e| e.to_string())?;
        c.send(&bytes)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "closed without an answer".to_string())
    })
    .await
    .map_err(|_| "no answer within 10 s (an open stream?)".to_string())?
}

/// The forgeries and blanket requests again and again from `workers` clients, each answer
/// checked for b's data and its expected status.
async fn forgery_storm(
    d: &Daemon,
    requests: Arc<Vec<Checked>>,
    total: usize,
    workers: usize,
) -> (usize, Vec<String>) {
    let failures = Arc::new(Mutex::new(Vec::new()));
    let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let addr = d.addr;
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let (requests, failures, sent) = (requests.clone(), failures.clone(), sent.clone());
            tokio::spawn(async move {
                let mut conn = None;
                let n = total / workers + usize::from(w < total % workers);
                for k in 0..n {
                    let (name, bytes, status) = &requests[(w * 5 + k) % requests.len()];
                    let outcome = tokio::time::timeout(
                        Duration::from_secs(10),
                        hostile::exchange(addr, &mut conn, bytes),
                    )
                    .await;
                    sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let why = match outcome {
                        Err(_) => Some("no answer within 10 s".to_string()),
                        Ok(Err(e)) => Some(format!("transport: {e}")),
                        Ok(Ok(None)) => Some("closed without an answer".to_string()),
                        Ok(Ok(Some(r))) => {
                            if leaks(&r) {
                                Some(format!("answered with b's data: {:.300}", r.text()))
                            } else if status.is_some_and(|s| s != r.status) {
                                Some(format!(
                                    "expected {status:?}, got {} {:.200}",
                                    r.status,
                                    r.text()
                                ))
                            } else if fault(&r) {
                                Some(format!("a server fault: {} {:.200}", r.status, r.text()))
                            } else {
                                None
                            }
                        }
                    };
                    if let Some(why) = why {
                        let mut f = failures.lock().await;
                        if f.len() < 50 {
                            f.push(format!("{name}: {why}"));
                        }
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let failures = std::mem::take(&mut *failures.lock().await);
    (sent.load(std::sync::atomic::Ordering::Relaxed), failures)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_cannot_reach_another_namespaces_data() {
    let total: usize = std::env::var("CALLBACKD_HOSTILE_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cross.db");
    let daemon = daemon::start_with(
        dir.path(),
        &db,
        &[
            ("server", "max_body_bytes = 65536"),
            ("server", "header_read_timeout_ms = 1000"),
            ("server", "body_read_timeout_ms = 1000"),
        ],
        &namespaces_toml(),
    );

    // Arrange: b's data, what b reads of it, and its rows.
    fill_b(&daemon).await;
    let held = hold_b_call(&daemon).await;
    let b_view = view_b(&daemon).await;
    let b_rows = daemon::snapshot_ns(&db, B.name);
    for table in [
        "agents",
        "runs",
        "run_events",
        "checkpoints",
        "memory_notes",
        "tool_calls",
        "approvals",
    ] {
        let rows = b_rows
            .iter()
            .find(|(t, _)| t == table)
            .map_or(0, |(_, r)| r.len());
        assert!(
            rows > 0,
            "namespace {} has no rows in {table}: {b_rows:#?}",
            B.name
        );
    }

    // Act 1: every forgery with b's ids and with ids that exist nowhere.
    let mut failures = Vec::new();
    let reading = reading_forgeries();
    differential(&daemon, &reading, &mut failures).await;
    let writing = writing_forgeries();
    differential(&daemon, &writing, &mut failures).await;
    for (name, bytes, status) in blanket_requests() {
        match send(&daemon, &bytes).await {
            Ok(r) => {
                if leaks(&r) {
                    failures.push(format!("{name}: answered with b's data: {}", r.text()));
                }
                if status.is_some_and(|s| s != r.status) {
                    failures.push(format!(
                        "{name}: expected {status:?}, got {} {}",
                        r.status,
                        r.text()
                    ));
                }
            }
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures: {failures:#?}",
        failures.len()
    );

    // Act 2: the hostile cases with a's tokens, and every forgery again, side by side.
    let cases: Arc<Vec<Case>> = Arc::new(hostile::cases_with(A.store, A.tool));
    let mut requests: Vec<Checked> = Vec::new();
    for f in reading.iter().chain(&writing) {
        // Streams of a's own runs (created under b's ids above) would stay open.
        if !f.name.starts_with("stream") {
            requests.push((f.name.to_string(), (f.make)(&b_ids()), None));
        }
    }
    for (name, bytes, status) in blanket_requests() {
        requests.push((name.to_string(), bytes, status));
    }
    let (storm, (forged, forged_failures)) = tokio::join!(
        hostile::storm(&daemon, &cases, total / 2, 6),
        forgery_storm(&daemon, Arc::new(requests), total - total / 2, 4),
    );
    eprintln!(
        "cross-namespace: {} hostile requests and {forged} forgeries with a's tokens",
        storm.sent
    );
    let mut failures = storm.failures;
    failures.extend(forged_failures);
    assert!(
        failures.is_empty(),
        "{} failures: {failures:#?}",
        failures.len()
    );
    assert_eq!(storm.sent + forged, total);

    // Assert: b's rows and b's view unchanged, b's note still b's.
    let after = daemon::snapshot_ns(&db, B.name);
    for ((table, before), (_, now)) in b_rows.iter().zip(&after) {
        assert_eq!(before, now, "namespace b's {table} rows changed");
    }
    assert_eq!(b_rows, after, "namespace b's rows changed");
    assert_eq!(daemon::integrity(&db), "ok");
    let b_view_after = view_b(&daemon).await;
    for (before, now) in b_view.iter().zip(&b_view_after) {
        assert_eq!(before, now, "what b reads changed");
    }
    let note = daemon
        .tool_as(
            B.tool,
            "memory",
            AGENT,
            json!({"action": "get", "key": "plan"}),
        )
        .await;
    assert!(
        note.status == 200 && note.text().contains(&format!("{MARK} plan")),
        "b's note: {} {}",
        note.status,
        note.text()
    );
    // And a's own writes under b's ids are a's: b's append numbering went on where it was.
    let ev = daemon
        .ok_as(B.store, "runEvents", "append", event(RUN, 5))
        .await;
    assert_eq!(ev["seq"], 6, "b's next event: {ev}");
    // b's approval was real and still pending: b's own token decides it, and b's call ends.
    let id = b_ids().approval;
    let decided = daemon
        .api_as(
            B.api,
            "POST",
            &format!("/v1/approvals/{id}"),
            Some(json!({"decision": "deny", "reason": "b's own"})),
        )
        .await;
    assert_eq!(decided.status, 200, "b decides its own: {}", decided.text());
    let answer = tokio::time::timeout(Duration::from_secs(10), held)
        .await
        .expect("b's call ends once decided")
        .unwrap()
        .expect("b's call answered");
    assert!(
        answer.text().contains("b's own"),
        "b's call got b's denial: {}",
        answer.text()
    );
    assert!(daemon.stop().success());
}
