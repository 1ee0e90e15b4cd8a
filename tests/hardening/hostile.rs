//! A hostile client against the real binary: ~10,000 malformed, oversized, unauthenticated
//! and slow requests, then the daemon must still answer correctly, hold no more memory or
//! file descriptors than before (no leaked connection tasks), and have stored nothing.
//!
//! `CALLBACKD_HOSTILE_REQUESTS` sets the count (default 10,000: seconds on loopback);
//! `CALLBACKD_HOSTILE_VERBOSE=1` prints what each case is answered.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::Mutex;

use crate::daemon::{self, Conn, Daemon, Reply, Req, STORE_PATH, STORE_TOKEN, TOOL_TOKEN};

/// What a hostile request must get back.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Expect {
    /// Exactly this HTTP status with this Connect code in a JSON error body.
    Connect(u16, &'static str),
    /// Refused by the HTTP layer before reaching the service: a 4xx (431, 400, ...) or the
    /// connection closed. Never a 2xx, never a 5xx.
    Refused,
    /// Either of the above: a request the HTTP layer may pass on (then the service answers
    /// a Connect client error) or refuse itself.
    ClientError,
}

pub(crate) struct Case {
    pub name: &'static str,
    pub bytes: Vec<u8>,
    pub expect: Expect,
}

/// Would delete every agent if authentication or the filter check ever failed open.
const DELETE_ALL: &[u8] = br#"{"substore":"agents","method":"delete","input":{"filter":{}}}"#;

fn store_body(substore: &str, method: &str, input: &str) -> Vec<u8> {
    format!(r#"{{"substore":"{substore}","method":"{method}","input":{input}}}"#).into_bytes()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

fn cases() -> Vec<Case> {
    cases_with(STORE_TOKEN, TOOL_TOKEN)
}

/// The cases with the store and tool tokens of another namespace (`cross_namespace`).
pub(crate) fn cases_with(store_token: &str, tool_token: &str) -> Vec<Case> {
    let req = |body: &[u8]| Req::store_as(body, store_token);
    use Expect::*;
    let unauth = Connect(401, "unauthenticated");
    let invalid = Connect(400, "invalid_argument");
    let bearer = |t: &str| format!("Bearer {t}").into_bytes();
    let auth_case = |name, value: Option<Vec<u8>>| Case {
        name,
        bytes: req(DELETE_ALL)
            .header("authorization", value.as_deref())
            .build(),
        expect: unauth,
    };
    let body_case = |name, body: Vec<u8>, expect| Case {
        name,
        bytes: req(&body).build(),
        expect,
    };
    let mut token_non_ascii = bearer(store_token);
    token_non_ascii.extend_from_slice(&[0xe9, 0xff]);
    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    vec![
        // --- authentication (each carries a delete-everything body) ---
        auth_case("no authorization", None),
        auth_case("wrong token", Some(bearer("nope"))),
        auth_case("tool token on the store", Some(bearer(tool_token))),
        auth_case("basic scheme", Some(b"Basic aGFyZGVuaW5nOnRva2Vu".to_vec())),
        auth_case("lowercase scheme", Some(format!("bearer {store_token}").into_bytes())),
        auth_case("token prefix", Some(bearer(&store_token[..10]))),
        auth_case("token plus suffix", Some(bearer(&format!("{store_token}x")))),
        auth_case("token with non-ASCII bytes", Some(token_non_ascii)),
        auth_case("empty bearer", Some(b"Bearer ".to_vec())),
        auth_case("32 KiB token", Some(bearer(&"t".repeat(32 * 1024)))),
        Case {
            name: "two authorization headers",
            bytes: {
                let mut r = req(DELETE_ALL);
                r.headers.push((b"authorization".to_vec(), bearer("nope")));
                r.build()
            },
            expect: unauth,
        },
        // --- routing, methods, content types, Connect headers ---
        Case {
            name: "GET on the store",
            bytes: Req { method: "GET", ..req(b"") }.build(),
            expect: Connect(405, "unimplemented"),
        },
        Case {
            name: "DELETE on the store",
            bytes: Req { method: "DELETE", ..req(DELETE_ALL) }.build(),
            expect: Connect(405, "unimplemented"),
        },
        Case {
            name: "unknown procedure",
            bytes: Req { path: b"/sdk.v1.SdkStoreCallbackService/DropAll".to_vec(), ..req(DELETE_ALL) }.build(),
            expect: Connect(404, "unimplemented"),
        },
        Case {
            name: "path traversal",
            bytes: Req { path: b"/../../etc/passwd".to_vec(), ..req(b"{}") }.build(),
            expect: Connect(404, "unimplemented"),
        },
        Case {
            name: "64 KiB path",
            bytes: Req { path: format!("/{}", "p".repeat(64 * 1024)).into_bytes(), ..req(b"{}") }.build(),
            expect: ClientError,
        },
        Case {
            name: "non-ASCII bytes in the path",
            bytes: Req { path: b"/sdk.v1.SdkStoreCallbackService/Call\xc3\xa9Store".to_vec(), ..req(b"{}") }.build(),
            expect: ClientError,
        },
        Case {
            name: "text/plain",
            bytes: req(DELETE_ALL).header("content-type", Some(b"text/plain")).build(),
            expect: Connect(415, "unimplemented"),
        },
        Case {
            name: "no content type",
            bytes: req(DELETE_ALL).header("content-type", None).build(),
            expect: Connect(415, "unimplemented"),
        },
        Case {
            name: "non-ASCII content type",
            bytes: req(DELETE_ALL).header("content-type", Some(b"application/j\xf6son")).build(),
            expect: Connect(415, "unimplemented"),
        },
        Case {
            name: "unsupported content encoding",
            bytes: req(DELETE_ALL).header("content-encoding", Some(b"br")).build(),
            expect: Connect(415, "unimplemented"),
        },
        Case {
            name: "protocol version 2",
            bytes: req(DELETE_ALL).header("connect-protocol-version", Some(b"2")).build(),
            expect: invalid,
        },
        Case {
            name: "bad timeout header",
            bytes: req(DELETE_ALL).header("connect-timeout-ms", Some(b"-5")).build(),
            expect: invalid,
        },
        // --- bodies ---
        body_case("empty body", Vec::new(), invalid),
        body_case("truncated JSON", b"{\"substore\":\"agents\",".to_vec(), invalid),
        body_case("invalid UTF-8", b"{\"substore\":\"agents\xff\xfe\"}".to_vec(), invalid),
        body_case("a JSON array", b"[1,2,3]".to_vec(), invalid),
        body_case("JSON nested 5000 deep", store_body("runEvents", "append", &format!(r#"{{"runId":"r","eventType":"e","payload":{deep}}}"#)), invalid),
        body_case("number beyond a double", store_body("runEvents", "append", r#"{"runId":"r","eventType":"e","payload":{"n":1e400}}"#), invalid),
        body_case("unpaired surrogate", store_body("agents", "create", r#"{"agent":{"agentId":"z","cwd":"/","s":"\udead"}}"#), invalid),
        body_case("duplicate top-level keys", br#"{"substore":"agents","substore":"runs","method":"get","input":{}}"#.to_vec(), invalid),
        body_case("duplicate keys in a delete filter", store_body("runs", "delete", r#"{"filter":{"runIds":["r"],"runIds":null}}"#), invalid),
        body_case("duplicate keys in the input", store_body("agents", "delete", r#"{"filter":{},"filter":{"agentIds":["a"]}}"#), invalid),
        body_case("delete with a string filter", store_body("agents", "delete", r#"{"filter":"all"}"#), invalid),
        body_case("delete with a list filter", store_body("runs", "delete", r#"{"filter":[]}"#), invalid),
        body_case("delete with a number filter", store_body("checkpoints", "delete", r#"{"filter":0}"#), invalid),
        body_case("delete with a null filter", store_body("runEvents", "delete", r#"{"filter":null}"#), invalid),
        body_case("delete without a filter", store_body("agents", "delete", "{}"), invalid),
        body_case("delete with wrongly typed ids", store_body("runs", "delete", r#"{"filter":{"runIds":"r"}}"#), invalid),
        body_case("list ids of the wrong type", store_body("agents", "list", r#"{"filter":{"agentIds":[1,2]}}"#), invalid),
        body_case("garbage cursor", store_body("agents", "list", r#"{"filter":{"cursor":"%%%"}}"#), invalid),
        body_case("cursor of the wrong shape", store_body("runs", "list", r#"{"filter":{"cursor":"eyJhIjoxfQ"}}"#), invalid),
        body_case("negative limit", store_body("runEvents", "list", r#"{"runId":"r","limit":-1}"#), invalid),
        body_case("negative offset", store_body("runEvents", "list", r#"{"runId":"r","afterOffset":"-1"}"#), invalid),
        body_case("offset beyond u64", store_body("runEvents", "list", r#"{"runId":"r","afterOffset":"99999999999999999999"}"#), invalid),
        body_case("invalid base64", store_body("checkpoints", "create", r#"{"agentId":"a","blobId":"z","data":"@@@"}"#), invalid),
        body_case("unknown substore", store_body("users", "get", "{}"), invalid),
        body_case("unknown method", store_body("agents", "drop", "{}"), invalid),
        body_case("input not an object", store_body("agents", "get", "\"a\""), invalid),
        body_case("empty id", store_body("agents", "get", r#"{"agentId":""}"#), invalid),
        Case {
            name: "invalid protobuf",
            bytes: req(b"\x0a\xff\xff\xff\xff\x0f").header("content-type", Some(b"application/proto")).build(),
            expect: invalid,
        },
        Case {
            name: "JSON sent as protobuf",
            bytes: req(DELETE_ALL).header("content-type", Some(b"application/proto")).build(),
            expect: invalid,
        },
        // --- sizes and compression (the daemon runs with a 64 KiB body limit) ---
        Case {
            name: "declared length over the limit, body never sent",
            bytes: {
                let mut r = req(b"").build();
                let at = r.windows(19).position(|w| w == b"content-length: 0\r\n").unwrap();
                r.splice(at..at + 19, b"content-length: 1000000000\r\n".iter().copied());
                r
            },
            expect: Connect(429, "resource_exhausted"),
        },
        body_case("body over the limit", vec![b' '; 80 * 1024], Connect(429, "resource_exhausted")),
        Case {
            name: "chunked body over the limit",
            bytes: req(&vec![b' '; 80 * 1024]).chunked().build(),
            expect: Connect(429, "resource_exhausted"),
        },
        Case {
            name: "gzip bomb (10 MiB of spaces)",
            bytes: req(&gzip(&vec![b' '; 10 << 20])).header("content-encoding", Some(b"gzip")).build(),
            expect: Connect(429, "resource_exhausted"),
        },
        Case {
            name: "invalid gzip",
            bytes: req(b"\x1f\x8b\x08\x00garbage").header("content-encoding", Some(b"gzip")).build(),
            expect: invalid,
        },
        Case {
            name: "gzip of invalid JSON",
            bytes: req(&gzip(b"{nope")).header("content-encoding", Some(b"gzip")).build(),
            expect: invalid,
        },
        // --- the HTTP layer ---
        Case {
            name: "a 1 MiB header",
            bytes: req(DELETE_ALL).header("x-big", Some(&vec![b'a'; 1 << 20])).build(),
            expect: Refused,
        },
        Case {
            name: "200 headers",
            bytes: {
                let mut r = req(DELETE_ALL);
                for i in 0..200 {
                    r.headers.push((format!("x-h{i}").into_bytes(), b"v".to_vec()));
                }
                r.build()
            },
            expect: Refused,
        },
        Case {
            name: "non-ASCII header name",
            bytes: req(DELETE_ALL).header("x-caf\u{e9}", Some(b"1")).build(),
            expect: Refused,
        },
        Case {
            name: "non-ASCII header value",
            // Legal bytes (obs-text); with a wrong token so a pass would show as a 200.
            bytes: req(DELETE_ALL)
                .header("x-note", Some(b"caf\xc3\xa9 \xff"))
                .header("authorization", Some(b"Bearer wr\xf6ng"))
                .build(),
            expect: unauth,
        },
        Case {
            name: "NUL in a header value",
            bytes: req(DELETE_ALL).header("x-note", Some(b"a\0b")).build(),
            expect: Refused,
        },
        Case {
            name: "garbage request line",
            bytes: b"HELLO THERE\r\n\r\n".to_vec(),
            expect: Refused,
        },
        Case {
            name: "binary noise",
            bytes: (0..=255u8).cycle().take(4096).collect(),
            expect: Refused,
        },
        Case {
            name: "HTTP/2 preface",
            bytes: b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec(),
            expect: Refused,
        },
        Case {
            name: "TLS client hello",
            bytes: b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03".to_vec(),
            expect: Refused,
        },
        Case {
            name: "negative content length",
            bytes: format!("POST {STORE_PATH} HTTP/1.1\r\nhost: x\r\ncontent-length: -1\r\n\r\n").into_bytes(),
            expect: Refused,
        },
        Case {
            name: "two different content lengths",
            bytes: format!("POST {STORE_PATH} HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{{}}").into_bytes(),
            expect: Refused,
        },
        Case {
            name: "content length and chunked",
            bytes: format!(
                "POST {STORE_PATH} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nauthorization: Bearer {store_token}\r\n\
                 content-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n"
            )
            .into_bytes(),
            expect: ClientError,
        },
        Case {
            name: "invalid chunk size",
            bytes: format!(
                "POST {STORE_PATH} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nauthorization: Bearer {store_token}\r\n\
                 transfer-encoding: chunked\r\n\r\nzz\r\n{{}}\r\n0\r\n\r\n"
            )
            .into_bytes(),
            expect: ClientError,
        },
    ]
}

/// Checks one outcome against its expectation.
pub(crate) fn judge(
    expect: Expect,
    outcome: &std::io::Result<Option<Reply>>,
) -> Result<(), String> {
    let reply = match outcome {
        Ok(Some(reply)) => reply,
        Ok(None) | Err(_) => {
            return match expect {
                Expect::Refused | Expect::ClientError => Ok(()),
                Expect::Connect(status, code) => Err(format!(
                    "expected {status} {code}, the connection closed: {outcome:?}"
                )),
            }
        }
    };
    let code = reply.connect_code();
    let summary = || format!("{} {:?}: {:.200}", reply.status, code, reply.text());
    if !(400..500).contains(&reply.status) {
        return Err(format!("not a 4xx: {}", summary()));
    }
    match expect {
        Expect::Connect(status, want) => {
            if reply.status != status || code.as_deref() != Some(want) {
                return Err(format!("expected {status} {want}, got {}", summary()));
            }
        }
        Expect::ClientError => {
            if code.is_none() && reply.status != 400 && reply.status != 431 && reply.status != 414 {
                return Err(format!("expected a Connect error, got {}", summary()));
            }
        }
        Expect::Refused => {}
    }
    if matches!(code.as_deref(), Some("internal" | "unknown" | "data_loss")) {
        return Err(format!("a server-fault code: {}", summary()));
    }
    Ok(())
}

/// Sends `case` on `conn` (reusing it when possible), retrying once on a fresh connection
/// if a reused one turned out to be closed.
pub(crate) async fn exchange(
    addr: std::net::SocketAddr,
    conn: &mut Option<Conn>,
    bytes: &[u8],
) -> std::io::Result<Option<Reply>> {
    let reused = conn.is_some();
    let mut c = match conn.take() {
        Some(c) => c,
        None => Conn::open(addr).await?,
    };
    let mut outcome = c.send(bytes).await;
    if reused && matches!(outcome, Ok(None) | Err(_)) {
        c = Conn::open(addr).await?;
        outcome = c.send(bytes).await;
    }
    // Keep the connection only after a complete answer the daemon did not close.
    if let Ok(Some(reply)) = &outcome {
        if !reply
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
        {
            *conn = Some(c);
        }
    }
    outcome
}

#[derive(Default)]
pub(crate) struct Tally {
    pub sent: usize,
    pub by_case: BTreeMap<&'static str, usize>,
    pub failures: Vec<String>,
}

/// Fires `total` requests from `workers` concurrent clients, cycling through the cases.
pub(crate) async fn storm(
    daemon: &Daemon,
    cases: &Arc<Vec<Case>>,
    total: usize,
    workers: usize,
) -> Tally {
    let tally = Arc::new(Mutex::new(Tally::default()));
    let addr = daemon.addr;
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let cases = cases.clone();
            let tally = tally.clone();
            tokio::spawn(async move {
                let mut conn = None;
                let n = total / workers + usize::from(w < total % workers);
                for k in 0..n {
                    let case = &cases[(w * 7 + k) % cases.len()];
                    let outcome = tokio::time::timeout(
                        Duration::from_secs(10),
                        exchange(addr, &mut conn, &case.bytes),
                    )
                    .await
                    .unwrap_or_else(|_| {
                        Err(std::io::Error::other("no answer within 10 s (a hang)"))
                    });
                    let verdict = match &outcome {
                        Err(e) if e.to_string().contains("a hang") => Err(e.to_string()),
                        _ => judge(case.expect, &outcome),
                    };
                    let mut t = tally.lock().await;
                    t.sent += 1;
                    *t.by_case.entry(case.name).or_default() += 1;
                    if let Err(why) = verdict {
                        if t.failures.len() < 50 {
                            t.failures.push(format!("{}: {why}", case.name));
                        }
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    Arc::try_unwrap(tally).ok().unwrap().into_inner()
}

/// Slow clients: idle connections, headers dribbled a byte at a time, bodies that stall.
/// Each must be cut off within its timeout (1 s here) plus slack, and the stalled bodies
/// answered 408 `deadline_exceeded` (unauthenticated ones 401 at once).
async fn slow_clients(daemon: &Daemon, rounds: usize) -> Vec<String> {
    let addr = daemon.addr;
    let slack = Duration::from_secs(4);
    let mut tasks = Vec::new();
    for round in 0..rounds {
        for kind in 0..5 {
            for _ in 0..4 {
                tasks.push(tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(300 * round as u64)).await;
                    let mut c = Conn::open(addr).await.map_err(|e| e.to_string())?;
                    let started = Instant::now();
                    let head = format!(
                        "POST {STORE_PATH} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                    );
                    match kind {
                        // Idle: connect, say nothing.
                        0 => {}
                        // Slowloris: one header byte every 100 ms, never finishing.
                        1 => {
                            for b in head.bytes().chain(std::iter::repeat(b'x')).take(60) {
                                if c.write(&[b]).await.is_err() {
                                    break;
                                }
                                tokio::time::sleep(Duration::from_millis(100)).await;
                            }
                        }
                        // A body promised and stalled (content-length, then chunked).
                        2 | 3 => {
                            let framing = if kind == 2 {
                                "content-length: 1000\r\n\r\n{\"substore\":".to_string()
                            } else {
                                "transfer-encoding: chunked\r\n\r\n100\r\n{\"substore\":".to_string()
                            };
                            let req = format!("{head}authorization: Bearer {STORE_TOKEN}\r\n{framing}");
                            c.write(req.as_bytes()).await.map_err(|e| e.to_string())?;
                            let reply = tokio::time::timeout(slack + Duration::from_secs(1), c.read_reply())
                                .await
                                .map_err(|_| "stalled body: no answer".to_string())?
                                .map_err(|e| e.to_string())?
                                .ok_or("stalled body: closed without an answer")?;
                            if (reply.status, reply.connect_code().as_deref()) != (408, Some("deadline_exceeded")) {
                                return Err(format!("stalled body: {} {}", reply.status, reply.text()));
                            }
                        }
                        // A stalled body without a token: refused at once, not after the body.
                        _ => {
                            let req = format!("{head}content-length: 1000\r\n\r\n{{");
                            c.write(req.as_bytes()).await.map_err(|e| e.to_string())?;
                            let reply = tokio::time::timeout(Duration::from_secs(3), c.read_reply())
                                .await
                                .map_err(|_| "unauthenticated stalled body: no answer".to_string())?
                                .map_err(|e| e.to_string())?
                                .ok_or("unauthenticated stalled body: closed")?;
                            if reply.status != 401 {
                                return Err(format!("unauthenticated stalled body: {}", reply.status));
                            }
                            return Ok(());
                        }
                    }
                    if !c.closed_within(slack).await {
                        return Err(format!("slow client of kind {kind} still open after {:?}", started.elapsed()));
                    }
                    Ok::<(), String>(())
                }));
            }
        }
    }
    let mut failures = Vec::new();
    for t in tasks {
        if let Err(e) = t.await.unwrap() {
            failures.push(e);
        }
    }
    failures
}

/// The daemon's open fds once they stop changing (the warm-up's connections closed).
async fn steady_fds(daemon: &Daemon) -> usize {
    let deadline = Instant::now() + Duration::from_secs(5);
    let (mut last, mut same) = (daemon.open_fds(), 0);
    while same < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = daemon.open_fds();
        same = if now == last { same + 1 } else { 0 };
        last = now;
    }
    last
}

/// Polls until the daemon's open fds are back to `baseline` (+ `slack`), or gives up.
async fn settled_fds(daemon: &Daemon, baseline: usize, slack: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let fds = daemon.open_fds();
        if fds <= baseline + slack || Instant::now() > deadline {
            return fds;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_client_changes_nothing_and_leaks_nothing() {
    let total: usize = std::env::var("CALLBACKD_HOSTILE_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("hostile.db");
    let daemon = daemon::start(
        dir.path(),
        &db,
        &[
            ("server", "max_body_bytes = 65536"),
            ("server", "header_read_timeout_ms = 1000"),
            ("server", "body_read_timeout_ms = 1000"),
        ],
    );

    // Arrange: a little of everything stored.
    let agent =
        json!({"agentId": "a", "cwd": "/ws", "updatedAt": 1, "name": "caf\u{e9} \u{1f600}"});
    daemon.ok("agents", "create", json!({"agent": agent})).await;
    daemon
        .ok(
            "runs",
            "create",
            json!({"run": {"agentId": "a", "runId": "r", "turnNumber": 1}}),
        )
        .await;
    for i in 0..3 {
        daemon
            .ok(
                "runEvents",
                "append",
                json!({"runId": "r", "eventType": "e", "payload": daemon::payload(i, 10)}),
            )
            .await;
    }
    daemon
        .ok(
            "checkpoints",
            "create",
            json!({"agentId": "a", "blobId": "b", "data": "AAEC"}),
        )
        .await;
    let before = daemon::snapshot(&db);

    let cases = Arc::new(cases());

    if std::env::var_os("CALLBACKD_HOSTILE_VERBOSE").is_some() {
        for case in cases.iter() {
            let outcome = exchange(daemon.addr, &mut None, &case.bytes).await;
            let seen = match &outcome {
                Ok(Some(r)) => format!("{} {:?}", r.status, r.connect_code()),
                other => format!("{other:?}"),
            };
            eprintln!("{:<50} {seen}", case.name);
        }
    }
    // Warm up every path twice, then take the baseline.
    let warm = storm(&daemon, &cases, cases.len() * 2, 1).await;
    assert!(warm.failures.is_empty(), "warm-up: {:#?}", warm.failures);
    let base_fds = steady_fds(&daemon).await;
    let base_rss = daemon.rss_kib();

    // Act: half the storm, a first wave of slow clients alongside, then the other half.
    let started = Instant::now();
    let (first, slow) = tokio::join!(
        storm(&daemon, &cases, total / 2, 8),
        slow_clients(&daemon, 2)
    );
    let mid_rss = daemon.rss_kib();
    let second = storm(&daemon, &cases, total - total / 2, 8).await;
    let elapsed = started.elapsed();
    let fds = settled_fds(&daemon, base_fds, 2).await;
    let rss = daemon.rss_kib();
    eprintln!(
        "hostile: {} requests + {} slow clients in {elapsed:.1?}; RSS {base_rss} -> {mid_rss} -> {rss} KiB; fds {base_fds} -> {fds}",
        first.sent + second.sent,
        2 * 5 * 4,
    );

    // Assert: every request answered as a client mistake.
    let mut failures = first.failures;
    failures.extend(second.failures);
    failures.extend(slow);
    assert!(
        failures.is_empty(),
        "{} failures: {failures:#?}",
        failures.len()
    );
    assert_eq!(first.sent + second.sent, total);
    if total >= cases.len() * 16 {
        assert_eq!(first.by_case.len(), cases.len(), "every case was sent");
    }
    // No leaked connections (each holds an fd and a task) and no memory growth to speak of.
    assert!(
        fds <= base_fds + 2,
        "open fds {base_fds} before, {fds} after"
    );
    assert!(
        rss <= base_rss + 8 * 1024,
        "RSS grew from {base_rss} KiB to {rss} KiB"
    );
    assert!(
        rss <= mid_rss + 4 * 1024,
        "RSS still growing in the second half: {mid_rss} KiB -> {rss} KiB"
    );
    // Nothing stored changed, and the daemon still answers correctly.
    assert_eq!(daemon::snapshot(&db), before, "the database changed");
    assert_eq!(daemon::integrity(&db), "ok");
    let got = daemon.ok("agents", "get", json!({"agentId": "a"})).await;
    assert_eq!(got, agent);
    let ev = daemon
        .ok(
            "runEvents",
            "append",
            json!({"runId": "r", "eventType": "e", "payload": daemon::payload(3, 10)}),
        )
        .await;
    assert_eq!(ev["seq"], 4);
    assert!(daemon.stop().success());
}
