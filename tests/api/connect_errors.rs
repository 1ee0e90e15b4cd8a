//! Bad input: every malformed, oversized, unauthenticated or unknown request gets a Connect
//! error with the right code and a message naming the problem, and nothing stored changes.

use std::io::Write;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::helpers::{agent, run, Framing, TestApp, STORE_PATH, TOOL_PATH};

/// Everything stored, as one comparable value.
async fn snapshot(app: &TestApp) -> Vec<String> {
    let mut out = Vec::new();
    for (sqlite, postgres) in [
        ("SELECT agent_id || doc FROM agents ORDER BY 1", None),
        ("SELECT run_id || doc FROM runs ORDER BY 1", None),
        (
            "SELECT run_id || seq || payload FROM run_events ORDER BY 1",
            None,
        ),
        (
            "SELECT blob_id || hex(data) FROM checkpoints ORDER BY 1",
            Some("SELECT blob_id || encode(data, 'hex') FROM checkpoints ORDER BY 1"),
        ),
    ] {
        out.extend(app.rows(sqlite, postgres.unwrap_or(sqlite)).await);
    }
    out
}

/// An empty CallStore body with the right token, JSON content type and one extra header.
async fn store_with_header(app: &TestApp, name: &str, value: &str) -> crate::helpers::Resp {
    let auth = format!("Bearer {}", app.store_token);
    let headers = [
        ("content-type", "application/json"),
        ("authorization", auth.as_str()),
        (name, value),
    ];
    app.request("POST", STORE_PATH, &headers, "{}", Framing::Chunked)
        .await
}

/// A CallStore whose body is already gzip-compressed (`Content-Encoding: gzip`).
async fn post_gzipped(app: &TestApp, gzipped: Vec<u8>) -> crate::helpers::Resp {
    let auth = format!("Bearer {}", app.store_token);
    let headers = [
        ("content-type", "application/json"),
        ("authorization", auth.as_str()),
        ("content-encoding", "gzip"),
    ];
    app.request("POST", STORE_PATH, &headers, gzipped, Framing::Chunked)
        .await
}

async fn seeded() -> TestApp {
    let app = TestApp::spawn_with(|c| c.server.max_body_bytes = 64 * 1024).await;
    app.store_ok("agents", "create", json!({"agent": agent("a", "/ws", 1)}))
        .await;
    app.store_ok("runs", "create", json!({"run": run("a", "r", 1)}))
        .await;
    app.store_ok(
        "runEvents",
        "append",
        json!({"runId": "r", "eventType": "e", "payload": 1}),
    )
    .await;
    app.store_ok(
        "checkpoints",
        "create",
        json!({"agentId": "a", "blobId": "b", "data": "AAE="}),
    )
    .await;
    app
}

#[tokio::test]
async fn unauthenticated_requests_are_401_without_detail() {
    let app = seeded().await;
    let before = snapshot(&app).await;
    let body = r#"{"substore":"agents","method":"delete","input":{"filter":{}}}"#;
    let wrong = "Bearer wrong-token".to_string();
    let lower = format!("bearer {}", app.store_token);
    let tool = format!("Bearer {}", app.tool_token);
    let bare = app.store_token.clone();
    let cases: Vec<Vec<(&str, &str)>> = vec![
        vec![],
        vec![("authorization", wrong.as_str())],
        vec![("authorization", lower.as_str())],
        vec![("authorization", bare.as_str())],
        vec![("authorization", "Bearer ")],
        vec![("authorization", tool.as_str())],
    ];
    for auth in cases {
        let mut headers = vec![("content-type", "application/json")];
        headers.extend(auth.iter().copied());
        let resp = app
            .request("POST", STORE_PATH, &headers, body, Framing::Chunked)
            .await;
        assert_eq!(resp.status, 401, "{auth:?}");
        assert_eq!(resp.code(), "unauthenticated");
        assert_eq!(resp.message(), "missing or invalid bearer token");
    }
    // The store token does not open the tool service either.
    let store = format!("Bearer {}", app.store_token);
    let resp = app
        .request(
            "POST",
            TOOL_PATH,
            &[
                ("content-type", "application/json"),
                ("authorization", &store),
            ],
            "{}",
            Framing::Chunked,
        )
        .await;
    assert_eq!(resp.code(), "unauthenticated");
    assert_eq!(snapshot(&app).await, before);
}

#[tokio::test]
async fn unknown_paths_wrong_methods_and_codecs_are_answered_per_the_connect_spec() {
    let app = seeded().await;
    let before = snapshot(&app).await;
    let auth = format!("Bearer {}", app.store_token);
    let json_ct = ("content-type", "application/json");

    let resp = app
        .request(
            "POST",
            "/sdk.v1.SdkStoreCallbackService/Nope",
            &[json_ct, ("authorization", &auth)],
            "{}",
            Framing::Chunked,
        )
        .await;
    assert_eq!((resp.status, resp.code()), (404, "unimplemented".into()));
    assert!(
        resp.message()
            .contains("/sdk.v1.SdkStoreCallbackService/Nope"),
        "{}",
        resp.message()
    );

    let resp = app
        .request(
            "GET",
            STORE_PATH,
            &[("authorization", &auth)],
            "",
            Framing::ContentLength,
        )
        .await;
    assert_eq!((resp.status, resp.code()), (405, "unimplemented".into()));
    assert!(resp.message().contains("POST"));

    for ct in ["text/plain", "application/grpc", "application/connect+json"] {
        let resp = app
            .request(
                "POST",
                STORE_PATH,
                &[("content-type", ct), ("authorization", &auth)],
                "{}",
                Framing::Chunked,
            )
            .await;
        assert_eq!(
            (resp.status, resp.code()),
            (415, "unimplemented".into()),
            "{ct}"
        );
        assert!(resp.message().contains(ct), "{}", resp.message());
    }
    let resp = app
        .request(
            "POST",
            STORE_PATH,
            &[("authorization", &auth)],
            "{}",
            Framing::Chunked,
        )
        .await;
    assert_eq!(resp.status, 415);

    let resp = store_with_header(&app, "connect-protocol-version", "2").await;
    assert_eq!(resp.code(), "invalid_argument");
    assert!(resp.message().contains("Connect-Protocol-Version"));

    let resp = store_with_header(&app, "connect-timeout-ms", "soon").await;
    assert_eq!(resp.code(), "invalid_argument");
    assert!(resp.message().contains("connect-timeout-ms"));

    let resp = store_with_header(&app, "content-encoding", "br").await;
    assert_eq!((resp.status, resp.code()), (415, "unimplemented".into()));
    assert!(resp.message().contains("Content-Encoding"));
    assert_eq!(snapshot(&app).await, before);
}

#[tokio::test]
async fn malformed_bodies_are_invalid_argument_naming_the_problem() {
    let app = seeded().await;
    let before = snapshot(&app).await;
    let cases: &[(&[u8], &str)] = &[
        (b"{\"substore\":", "invalid JSON"),
        (b"[1,2]", "must be a JSON object"),
        (b"\xff\xfe{}", "UTF-8"),
        (br#"{"substore":5,"method":"get"}"#, "invalid JSON"),
        (br#"{"method":"get","input":{}}"#, "substore is required"),
        (br#"{"subStore":"agents","method":"get","input":{}}"#, r#"unknown field "subStore" in sdk.v1.CallStoreRequest; did you mean "substore"?"#),
        (br#"{"substore":"agents","method":"get","inputs":{}}"#, r#"did you mean "input"?"#),
        (br#"{"substore":"agents","input":{}}"#, "method is required"),
        (br#"{"substore":"agents","method":"get","input":"x"}"#, "input must be a JSON object"),
        (br#"{"substore":"agents","method":"get","input":[]}"#, "input must be a JSON object"),
        (br#"{"substore":"nope","method":"get","input":{}}"#, "unknown substore \"nope\""),
        (br#"{"substore":"agents","method":"append","input":{}}"#, "unknown agents method \"append\""),
        (br#"{"substore":"agents","method":"get","input":{}}"#, "input.agentId is required"),
        (br#"{"substore":"agents","method":"get","input":{"agentId":7}}"#, "input.agentId must be a string"),
        (br#"{"substore":"agents","method":"create","input":{}}"#, "input.agent is required"),
        (br#"{"substore":"agents","method":"create","input":{"agent":"a"}}"#, "input.agent must be a JSON object"),
        (br#"{"substore":"agents","method":"update","input":{"agent":{"cwd":"/ws"}}}"#, "agent.agentId is required"),
        (br#"{"substore":"agents","method":"update","input":{"agent":{"agentId":"a","cwd":"/ws","updatedAt":"now"}}}"#, "agent.updatedAt must be a number"),
        (br#"{"substore":"runs","method":"create","input":{"run":{"agentId":"a"}}}"#, "run.runId is required"),
        (br#"{"substore":"runs","method":"get","input":{"agentId":"a"}}"#, "input.runId is required"),
        (br#"{"substore":"runEvents","method":"append","input":{"runId":"r"}}"#, "input.eventType is required"),
        (br#"{"substore":"runEvents","method":"list","input":{"runId":"r","afterOffset":"x1"}}"#, "invalid run event offset"),
        (br#"{"substore":"runEvents","method":"list","input":{"runId":"r","limit":-5}}"#, "input.limit must be a non-negative integer"),
        (br#"{"substore":"checkpoints","method":"create","input":{"agentId":"a","blobId":"c"}}"#, "input.data is required"),
        (br#"{"substore":"checkpoints","method":"create","input":{"agentId":"a","blobId":"c","data":"!!!"}}"#, "input.data is not valid base64"),
        (br#"{"substore":"agents","method":"list","input":{"filter":{"cursor":"garbage"}}}"#, "invalid agent list cursor"),
        (br#"{"substore":"runs","method":"list","input":{"filter":{"cursor":"e30"}}}"#, "invalid run list cursor"),
        (br#"{"substore":"agents","method":"delete","input":{}}"#, "input.filter is required"),
        (br#"{"substore":"agents","method":"delete","input":{"filter":"all"}}"#, "input.filter must be a JSON object"),
        (br#"{"substore":"runEvents","method":"delete","input":{"filter":[]}}"#, "input.filter must be a JSON object"),
        (br#"{"substore":"runs","method":"delete","input":{"filter":{"runIds":"r"}}}"#, "runIds must be a list of strings"),
        (br#"{"substore":"agents","method":"get","input":{"agentId":1e400}}"#, "beyond the range of a double"),
        (br#"{"substore":"agents","method":"create","input":{"agent":{"agentId":"a","cwd":"/","updatedAt":1e400}}}"#, "beyond the range of a double"),
        (br#"{"substore":"runEvents","method":"append","input":{"runId":"r","eventType":"e","payload":{"x":-2E+308}}}"#, "beyond the range of a double"),
        (br#"{"substore":"agents","method":"create","input":{"agent":{"agentId":"a","cwd":"/","s":"\ud800"}}}"#, "unpaired UTF-16 surrogate"),
    ];
    for (body, expected) in cases {
        let resp = app.store_raw(body.to_vec(), Framing::Chunked).await;
        assert_eq!(
            resp.status,
            400,
            "{}: {}",
            String::from_utf8_lossy(body),
            resp.text()
        );
        assert_eq!(
            resp.code(),
            "invalid_argument",
            "{}",
            String::from_utf8_lossy(body)
        );
        assert!(
            resp.message().contains(expected),
            "{:?} should mention {expected:?}",
            resp.message()
        );
    }
    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let body = format!(
        r#"{{"substore":"runEvents","method":"append","input":{{"runId":"r","eventType":"e","payload":{deep}}}}}"#
    );
    let resp = app.store_raw(body, Framing::Chunked).await;
    assert_eq!(resp.code(), "invalid_argument");
    assert_eq!(snapshot(&app).await, before);
}

#[tokio::test]
async fn invalid_protobuf_is_invalid_argument() {
    let app = seeded().await;
    let auth = format!("Bearer {}", app.store_token);
    let resp = app
        .request(
            "POST",
            STORE_PATH,
            &[
                ("content-type", "application/proto"),
                ("authorization", &auth),
            ],
            vec![0x0a, 0xff, 0x01],
            Framing::Chunked,
        )
        .await;
    assert_eq!(resp.code(), "invalid_argument");
    assert!(
        resp.message().contains("invalid protobuf"),
        "{}",
        resp.message()
    );
}

#[tokio::test]
async fn oversized_bodies_are_resource_exhausted_whatever_their_framing() {
    let app = seeded().await;
    let before = snapshot(&app).await;
    let big = format!(
        r#"{{"substore":"runEvents","method":"append","input":{{"runId":"r","eventType":"e","payload":"{}"}}}}"#,
        "x".repeat(100 * 1024)
    );
    for framing in [Framing::Chunked, Framing::ContentLength] {
        let resp = app.store_raw(big.clone(), framing).await;
        assert_eq!(
            (resp.status, resp.code()),
            (429, "resource_exhausted".into()),
            "{framing:?}"
        );
        assert!(resp.message().contains("65536"), "{}", resp.message());
    }
    // A gzip bomb: small on the wire, huge when inflated.
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(big.as_bytes()).unwrap();
    let bomb = enc.finish().unwrap();
    assert!(bomb.len() < 64 * 1024);
    let resp = post_gzipped(&app, bomb).await;
    assert_eq!(resp.code(), "resource_exhausted");
    assert!(resp.message().contains("decompressed"));
    assert_eq!(snapshot(&app).await, before);
}

#[tokio::test]
async fn gzip_request_bodies_are_accepted() {
    let app = seeded().await;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(br#"{"substore":"agents","method":"get","input":{"agentId":"a"}}"#)
        .unwrap();
    let resp = post_gzipped(&app, enc.finish().unwrap()).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["output"]["agentId"], "a");
}

#[tokio::test]
async fn a_truncated_chunked_body_is_rejected_and_stores_nothing() {
    let app = seeded().await;
    let before = snapshot(&app).await;
    let body =
        r#"{"substore":"runEvents","method":"append","input":{"runId":"r","eventType":"e"}}"#;
    let mut sock = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    let head = format!(
        "POST {STORE_PATH} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nauthorization: Bearer {}\r\ntransfer-encoding: chunked\r\n\r\n",
        app.store_token
    );
    // Announce the whole body, send half of it, then stop sending.
    let partial = format!("{:x}\r\n{}", body.len(), &body[..body.len() / 2]);
    sock.write_all(head.as_bytes()).await.unwrap();
    sock.write_all(partial.as_bytes()).await.unwrap();
    sock.shutdown().await.unwrap();
    let mut answer = String::new();
    let _ = sock.read_to_string(&mut answer).await;
    if !answer.is_empty() {
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
        assert!(answer.contains("invalid_argument"), "{answer}");
    }
    assert_eq!(snapshot(&app).await, before);
    // The daemon is still serving.
    assert!(app
        .store_ok("agents", "get", json!({"agentId": "a"}))
        .await
        .is_some());
}

#[tokio::test]
async fn healthz_answers_without_auth() {
    let app = TestApp::spawn().await;
    let resp = app
        .request("GET", "/healthz", &[], "", Framing::ContentLength)
        .await;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.json()["status"], "ok");
}

/// A refused request's body is read (when it comes at once), so the client reads the 401
/// instead of failing its write, and the connection stays usable. Before, the daemon
/// answered and closed with the body unread: the bridge's connect client then saw EPIPE
/// (`internal`) instead of `unauthenticated`, now and then.
#[tokio::test]
async fn a_refused_request_with_a_body_gets_its_401_and_keeps_the_connection() {
    let app = TestApp::spawn().await;
    let mut conn = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    let body = format!(
        r#"{{"substore":"agents","method":"list","input":{{"filter":{{}}, "pad":"{}"}}}}"#,
        "x".repeat(32 * 1024)
    );
    let request = |token: &str, body: &str| {
        format!(
            "POST {STORE_PATH} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
             authorization: Bearer {token}\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    conn.write_all(request("wrong-token", &body).as_bytes())
        .await
        .expect("the whole body is taken");
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("unauthenticated") {
        let n = conn.read(&mut buf).await.unwrap();
        assert!(
            n > 0,
            "closed before the 401: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 401"));
    // The same connection serves the next, authenticated request.
    let ok = r#"{"substore":"agents","method":"list","input":{}}"#;
    conn.write_all(request(&app.store_token, ok).as_bytes())
        .await
        .unwrap();
    let mut answer = Vec::new();
    while !String::from_utf8_lossy(&answer).contains("\"items\"") {
        let n = conn.read(&mut buf).await.unwrap();
        assert!(n > 0, "the connection was closed after the 401");
        answer.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));
}
