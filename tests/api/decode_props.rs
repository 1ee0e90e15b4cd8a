//! Property tests of request decoding: whatever bytes arrive, in either codec, decoding never
//! panics and every rejection is `invalid_argument` (a client mistake), never `internal`;
//! and whatever decodes, the store runs without an `internal` answer.
//!
//! Covers both codecs ([`decode_request`]), Struct conversion, store-op parsing
//! ([`StoreCall::parse`]), list cursors, event offsets, base64 blob data and the Connect
//! body reader (content type, encoding, gzip, timeout header). The case count is proptest's
//! (256, or `PROPTEST_CASES`); `scripts/hardening props` is the long run (see "Hardening
//! tests" in docs/hardening.md).

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use base64::Engine;
use callbackd::config::Config;
use callbackd::connect::{read_unary, Code, Codec, ConnectError, UnaryLimits};
use callbackd::proto::CallStoreRequest;
use callbackd::rpc::codec::{json_to_struct, struct_to_json};
use callbackd::rpc::store::decode_request;
use callbackd::store::sqlite::{SqliteOptions, SqliteStore};
use callbackd::store::{AgentCursor, RunCursor};
use callbackd::{Namespace, Store, StoreCall, StoreError};

use crate::helpers::{backend, Backend, PgTarget};
use http::{HeaderMap, HeaderName, HeaderValue};
use proptest::prelude::*;
use prost::Message;
use prost_types::value::Kind;
use prost_types::{ListValue, Struct, Value};

/// Keys the store reads, so generated inputs hit the real parsing paths.
const KEYS: &[&str] = &[
    "agentId",
    "runId",
    "blobId",
    "agent",
    "run",
    "filter",
    "cursor",
    "limit",
    "afterOffset",
    "data",
    "eventType",
    "payload",
    "payloadRef",
    "idempotencyKey",
    "agentIds",
    "runIds",
    "blobIds",
    "cwd",
    "updatedAt",
    "turnNumber",
];
const SUBSTORES: &[&str] = &["agents", "runs", "runEvents", "checkpoints"];
const METHODS: &[&str] = &["get", "create", "update", "delete", "list", "append"];

fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// The error of a decode must be a client mistake.
fn assert_client_error(e: &ConnectError, input: &dyn std::fmt::Debug) {
    assert_eq!(
        e.code,
        Code::InvalidArgument,
        "{input:?} was answered {:?}: {}",
        e.code,
        e.message
    );
}

fn check_decode(codec: Codec, body: &[u8]) -> Option<StoreCall> {
    match decode_request(codec, body) {
        Ok(call) => Some(call),
        Err(e) => {
            assert_client_error(&e, &String::from_utf8_lossy(body));
            None
        }
    }
}

// ---- JSON text strategies (text, so they can hold what serde_json::Value cannot) ----

fn any_cursor() -> impl Strategy<Value = String> {
    prop_oneof![
        (any::<i64>(), any::<String>()).prop_map(|(n, id)| AgentCursor {
            updated_at: n as f64,
            agent_id: id
        }
        .encode()),
        (any::<u32>(), any::<String>()).prop_map(|(n, id)| RunCursor {
            turn_number: f64::from(n),
            run_id: id
        }
        .encode()),
        any::<Vec<u8>>().prop_map(|b| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)),
    ]
}

fn leaf() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u32>().prop_map(|n| n.to_string()),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| f.to_string()),
        prop::sample::select(vec![
            "1e400",
            "-1e400",
            "1E+309",
            "1e-400",
            "18446744073709551616",
            "-0",
            "1.0",
            "2.5e3",
            "-5",
            "0.5",
            r#""\ud800""#,
            r#""\udc00x""#,
            r#""\ud83d\ude00""#,
            r#""\u0000""#,
            r#""""#,
            r#""18446744073709551615""#,
            r#""9223372036854775808""#,
            r#""-1""#,
            r#""AAE=""#,
            r#""AAE""#,
            r#""@@""#,
        ])
        .prop_map(str::to_string),
        any::<String>().prop_map(|s| quoted(&s)),
        "[0-9]{0,25}".prop_map(|s| quoted(&s)),
        any::<Vec<u8>>().prop_map(|b| quoted(&base64::engine::general_purpose::STANDARD.encode(b))),
        any_cursor().prop_map(|c| quoted(&c)),
        prop::sample::select(KEYS).prop_map(quoted),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(KEYS).prop_map(quoted),
        1 => any::<String>().prop_map(|s| quoted(&s)),
        1 => Just(r#""\ud800""#.to_string()),
    ]
}

fn object(entries: Vec<(String, String)>) -> String {
    let body: Vec<String> = entries
        .into_iter()
        .map(|(k, v)| format!("{k}:{v}"))
        .collect();
    format!("{{{}}}", body.join(","))
}

fn value() -> impl Strategy<Value = String> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((key(), inner), 0..6).prop_map(object),
        ]
    })
}

/// A `CallStoreRequest` in JSON: known or odd substores and methods, inputs built from the
/// store's own keys with values of every type, duplicate keys included.
fn json_request() -> impl Strategy<Value = String> {
    let name = |set: &'static [&'static str]| {
        prop_oneof![
            6 => prop::sample::select(set).prop_map(quoted),
            1 => value(),
        ]
    };
    let input = prop_oneof![
        8 => prop::collection::vec((key(), value()), 0..8).prop_map(object),
        1 => value(),
    ];
    (
        prop::option::weighted(0.95, name(SUBSTORES)),
        prop::option::weighted(0.95, name(METHODS)),
        prop::option::weighted(0.95, input),
        prop::option::of((any::<String>(), value())),
    )
        .prop_map(|(s, m, i, extra)| {
            let mut fields = Vec::new();
            if let Some(s) = s {
                fields.push((quoted("substore"), s));
            }
            if let Some(m) = m {
                fields.push((quoted("method"), m));
            }
            if let Some(i) = i {
                fields.push((quoted("input"), i));
            }
            if let Some((k, v)) = extra {
                fields.push((quoted(&k), v));
            }
            object(fields)
        })
}

/// One valid request per operation, whose slots take generated values: mostly well-typed,
/// sometimes not.
fn templated_request() -> impl Strategy<Value = String> {
    let id = prop_oneof![
        4 => "[a-z0-9-]{1,12}".prop_map(|s| quoted(&s)),
        1 => leaf(),
    ];
    let doc_extra = prop::collection::vec((key(), value()), 0..4);
    (
        0usize..18,
        id.clone(),
        id.clone(),
        id,
        leaf(),
        doc_extra,
        value(),
    )
        .prop_map(|(op, a, b, c, l, extra, v)| {
            let doc = |mut fields: Vec<(String, String)>| {
                fields.extend(extra.clone());
                object(fields)
            };
            let agent = doc(vec![
                (quoted("agentId"), a.clone()),
                (quoted("cwd"), c.clone()),
                (quoted("updatedAt"), l.clone()),
            ]);
            let run = doc(vec![
                (quoted("agentId"), a.clone()),
                (quoted("runId"), b.clone()),
                (quoted("turnNumber"), l.clone()),
            ]);
            let filter = doc(vec![
                (quoted("agentIds"), format!("[{a}]")),
                (quoted("cursor"), l.clone()),
                (quoted("limit"), c.clone()),
            ]);
            let (sub, method, input) = match op {
                0 => ("agents", "get", format!(r#"{{"agentId":{a}}}"#)),
                1 => ("agents", "create", format!(r#"{{"agent":{agent}}}"#)),
                2 => ("agents", "update", format!(r#"{{"agent":{agent}}}"#)),
                3 => ("agents", "delete", format!(r#"{{"filter":{v}}}"#)),
                4 => ("agents", "list", format!(r#"{{"filter":{filter}}}"#)),
                5 => ("runs", "get", format!(r#"{{"agentId":{a},"runId":{b}}}"#)),
                6 => ("runs", "create", format!(r#"{{"run":{run}}}"#)),
                7 => ("runs", "update", format!(r#"{{"run":{run}}}"#)),
                8 => ("runs", "delete", format!(r#"{{"filter":{v}}}"#)),
                9 => ("runs", "list", format!(r#"{{"filter":{filter}}}"#)),
                10 => (
                    "runEvents",
                    "append",
                    format!(
                        r#"{{"runId":{a},"eventType":{b},"payload":{v},"idempotencyKey":{c}}}"#
                    ),
                ),
                11 => (
                    "runEvents",
                    "list",
                    format!(r#"{{"runId":{a},"afterOffset":{l},"limit":{c}}}"#),
                ),
                12 => ("runEvents", "delete", format!(r#"{{"filter":{v}}}"#)),
                13 => (
                    "checkpoints",
                    "get",
                    format!(r#"{{"agentId":{a},"blobId":{b}}}"#),
                ),
                14 => (
                    "checkpoints",
                    "create",
                    format!(r#"{{"agentId":{a},"blobId":{b},"data":{l}}}"#),
                ),
                15 => (
                    "checkpoints",
                    "update",
                    format!(r#"{{"agentId":{a},"blobId":{b},"data":{c}}}"#),
                ),
                16 => ("checkpoints", "delete", format!(r#"{{"filter":{v}}}"#)),
                _ => ("checkpoints", "list", format!(r#"{{"filter":{filter}}}"#)),
            };
            format!(r#"{{"substore":"{sub}","method":"{method}","input":{input}}}"#)
        })
}

/// Byte-level damage to a valid body: flips, insertions, deletions, truncation.
fn mutated(base: impl Strategy<Value = Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    (
        base,
        prop::collection::vec((any::<usize>(), any::<u8>(), 0u8..4), 1..6),
    )
        .prop_map(|(mut bytes, edits)| {
            for (at, byte, kind) in edits {
                if bytes.is_empty() {
                    bytes.push(byte);
                    continue;
                }
                let at = at % bytes.len();
                match kind {
                    0 => bytes[at] = byte,
                    1 => bytes.insert(at, byte),
                    2 => {
                        bytes.remove(at);
                    }
                    _ => bytes.truncate(at),
                }
            }
            bytes
        })
}

// ---- protobuf strategies ----

fn proto_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(None),
        any::<i32>().prop_map(|n| Some(Kind::NullValue(n))),
        any::<f64>().prop_map(|n| Some(Kind::NumberValue(n))),
        prop::sample::select(vec![
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e300,
            -0.0
        ])
        .prop_map(|n| Some(Kind::NumberValue(n))),
        any::<String>().prop_map(|s| Some(Kind::StringValue(s))),
        "[a-z0-9-]{1,8}".prop_map(|s| Some(Kind::StringValue(s))),
        any::<bool>().prop_map(|b| Some(Kind::BoolValue(b))),
    ]
    .prop_map(|kind| Value { kind });
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5)
                .prop_map(|values| Some(Kind::ListValue(ListValue { values }))),
            proto_struct(inner).prop_map(|s| Some(Kind::StructValue(s))),
        ]
        .prop_map(|kind| Value { kind })
    })
}

fn proto_struct(values: impl Strategy<Value = Value>) -> impl Strategy<Value = Struct> {
    let key = prop_oneof![
        4 => prop::sample::select(KEYS).prop_map(str::to_string),
        1 => any::<String>(),
    ];
    prop::collection::btree_map(key, values, 0..6).prop_map(|fields| Struct {
        fields: fields.into_iter().collect(),
    })
}

fn proto_request() -> impl Strategy<Value = CallStoreRequest> {
    let name = |set: &'static [&'static str]| {
        prop_oneof![
            6 => prop::sample::select(set).prop_map(str::to_string),
            1 => any::<String>(),
        ]
    };
    (
        name(SUBSTORES),
        name(METHODS),
        prop::option::weighted(0.9, proto_struct(proto_value())),
    )
        .prop_map(|(substore, method, input)| CallStoreRequest {
            substore,
            method,
            input,
        })
}

// ---- properties ----

proptest! {
    #[test]
    fn arbitrary_bytes_are_rejected_as_invalid_argument_in_both_codecs(body in prop::collection::vec(any::<u8>(), 0..512)) {
        check_decode(Codec::Json, &body);
        check_decode(Codec::Proto, &body);
    }

    #[test]
    fn generated_json_requests_decode_or_are_invalid_argument(body in json_request()) {
        check_decode(Codec::Json, body.as_bytes());
    }

    #[test]
    fn templated_json_requests_decode_or_are_invalid_argument(body in templated_request()) {
        check_decode(Codec::Json, body.as_bytes());
    }

    #[test]
    fn damaged_json_requests_decode_or_are_invalid_argument(body in mutated(templated_request().prop_map(String::into_bytes))) {
        check_decode(Codec::Json, &body);
    }

    #[test]
    fn generated_proto_requests_decode_or_are_invalid_argument(req in proto_request()) {
        let call = check_decode(Codec::Proto, &req.encode_to_vec());
        // A request that decodes over proto decodes the same over JSON.
        if let (Some(call), Some(input)) = (call, req.input.as_ref()) {
            let json = serde_json::json!({
                "substore": req.substore, "method": req.method,
                "input": struct_to_json(input).unwrap(),
            });
            let over_json = decode_request(Codec::Json, json.to_string().as_bytes());
            prop_assert_eq!(over_json.ok(), Some(call));
        }
    }

    #[test]
    fn damaged_proto_requests_decode_or_are_invalid_argument(body in mutated(proto_request().prop_map(|r| r.encode_to_vec()))) {
        check_decode(Codec::Proto, &body);
    }

    #[test]
    fn struct_conversion_never_panics_and_refuses_only_non_finite_numbers(v in proto_value()) {
        let s = Struct { fields: [("v".to_string(), v)].into_iter().collect() };
        match struct_to_json(&s) {
            Ok(json) => {
                // What converts comes back as the same JSON.
                let back = struct_to_json(&json_to_struct(&json).unwrap()).unwrap();
                prop_assert_eq!(back, json);
            }
            Err(e) => prop_assert!(e.contains("cannot be represented in JSON"), "{}", e),
        }
    }

    #[test]
    fn cursors_decode_strictly_and_round_trip(s in any::<String>(), c in any_cursor(), n in any::<i64>(), id in any::<String>()) {
        for text in [&s, &c] {
            if let Err(e) = AgentCursor::decode(text) {
                prop_assert!(matches!(e, StoreError::Invalid(_)));
            }
            if let Err(e) = RunCursor::decode(text) {
                prop_assert!(matches!(e, StoreError::Invalid(_)));
            }
        }
        let agent = AgentCursor { updated_at: n as f64, agent_id: id.clone() };
        prop_assert_eq!(AgentCursor::decode(&agent.encode()).unwrap(), agent);
        let run = RunCursor { turn_number: n as f64, run_id: id };
        prop_assert_eq!(RunCursor::decode(&run.encode()).unwrap(), run);
    }

    #[test]
    fn offsets_parse_exactly_or_are_invalid(offset in leaf(), n in any::<u64>()) {
        let parse = |o: &str| StoreCall::parse("runEvents", "list", &format!(r#"{{"runId":"r","afterOffset":{o}}}"#));
        match parse(&offset) {
            Ok(StoreCall::EventsList { .. }) => {}
            Ok(other) => prop_assert!(false, "{:?}", other),
            Err(e) => prop_assert!(matches!(e, StoreError::Invalid(_)), "{e:?}"),
        }
        let exact = parse(&quoted(&n.to_string())).unwrap();
        let is_exact = matches!(exact, StoreCall::EventsList { after_seq, .. } if after_seq == n);
        prop_assert!(is_exact);
    }

    #[test]
    fn blob_data_is_base64_with_or_without_padding(bytes in any::<Vec<u8>>(), junk in any::<String>()) {
        let engines = [
            base64::engine::general_purpose::STANDARD,
            base64::engine::general_purpose::STANDARD_NO_PAD,
        ];
        for engine in engines {
            let input = serde_json::json!({"agentId": "a", "blobId": "b", "data": engine.encode(&bytes)});
            let call = StoreCall::parse("checkpoints", "create", &input.to_string()).unwrap();
            let decoded = matches!(call, StoreCall::CheckpointsCreate { ref data, .. } if *data == bytes);
            prop_assert!(decoded);
        }
        let input = serde_json::json!({"agentId": "a", "blobId": "b", "data": junk});
        if let Err(e) = StoreCall::parse("checkpoints", "update", &input.to_string()) {
            prop_assert!(matches!(e, StoreError::Invalid(_)));
        }
    }
}

/// Header values for the body reader: the legal ones and junk.
fn header_value(legal: &'static [&'static str]) -> impl Strategy<Value = Option<Vec<u8>>> {
    prop::option::of(prop_oneof![
        prop::sample::select(legal).prop_map(|s| s.as_bytes().to_vec()),
        prop::collection::vec(any::<u8>(), 0..24),
    ])
}

proptest! {
    #[test]
    fn the_body_reader_answers_only_client_error_codes(
        content_type in header_value(&["application/json", "application/proto", "application/json; charset=utf-8", "text/plain"]),
        encoding in header_value(&["gzip", "identity", "br"]),
        timeout in header_value(&["100", "0", "12345678901", "-1"]),
        version in header_value(&["1", "2"]),
        body in prop::collection::vec(any::<u8>(), 0..2048),
        gzip_it in any::<bool>(),
    ) {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("content-type", content_type),
            ("content-encoding", encoding),
            ("connect-timeout-ms", timeout),
            ("connect-protocol-version", version),
        ] {
            if let Some(v) = value.and_then(|v| HeaderValue::from_bytes(&v).ok()) {
                headers.insert(HeaderName::from_static(name), v);
            }
        }
        let body = if gzip_it {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            enc.write_all(&body).unwrap();
            enc.finish().unwrap()
        } else {
            body
        };
        let limits = UnaryLimits { max_body_bytes: 1024, body_read_timeout: Duration::from_secs(5) };
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        match rt.block_on(read_unary(&headers, Body::from(body), limits)) {
            Ok(req) => {
                prop_assert!(req.body.len() <= 1024);
                check_decode(req.codec, &req.body);
            }
            Err(e) => {
                let status = e.http_status().as_u16();
                prop_assert!((400..500).contains(&status), "{:?} {} -> {}", e.code, e.message, status);
                prop_assert!(matches!(
                    e.code,
                    Code::InvalidArgument | Code::Unimplemented | Code::ResourceExhausted
                ), "{:?}: {}", e.code, e.message);
            }
        }
    }
}

/// Every call that decodes is run on a real store: the answers may be not_found,
/// already_exists or invalid_argument, never internal or data_loss.
#[test]
fn whatever_decodes_runs_on_the_store_without_an_internal_error() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // The backend under test (PostgreSQL in its own schema, or a SQLite file).
    let pg = (backend() == Backend::Postgres).then(|| PgTarget::for_dir(dir.path()));
    let store: Arc<dyn Store> = match &pg {
        Some(pg) => {
            let mut config = Config::default();
            pg.apply(&mut config);
            rt.block_on(config.store.backend().open()).unwrap()
        }
        None => {
            Arc::new(SqliteStore::open(&SqliteOptions::new(dir.path().join("props.db"))).unwrap())
        }
    };
    let ns = Namespace::default();
    let strategy = prop_oneof![
        4 => templated_request(),
        1 => json_request(),
    ];
    let mut runner = proptest::test_runner::TestRunner::default();
    runner
        .run(&strategy, |body| {
            let Some(call) = check_decode(Codec::Json, body.as_bytes()) else {
                return Ok(());
            };
            match rt.block_on(store.call(&ns, call)) {
                Ok(_)
                | Err(StoreError::NotFound(_) | StoreError::AlreadyExists(_))
                | Err(StoreError::Invalid(_)) => Ok(()),
                Err(e) => Err(TestCaseError::fail(format!("{body} -> {e:?}"))),
            }
        })
        .unwrap();
    drop(store);
    match pg {
        Some(pg) => pg.drop_schema(),
        None => {
            let conn = rusqlite::Connection::open(dir.path().join("props.db")).unwrap();
            let ok: String = conn
                .query_row("PRAGMA integrity_check", [], |r| r.get(0))
                .unwrap();
            assert_eq!(ok, "ok");
        }
    }
}

/// Protobuf nesting beyond prost's recursion limit, and JSON beyond ours, are refused.
#[test]
fn nesting_thousands_deep_is_invalid_argument_in_both_codecs() {
    let mut v = Value {
        kind: Some(Kind::NullValue(0)),
    };
    for _ in 0..2000 {
        v = Value {
            kind: Some(Kind::ListValue(ListValue { values: vec![v] })),
        };
    }
    let req = CallStoreRequest {
        substore: "agents".into(),
        method: "get".into(),
        input: Some(Struct {
            fields: [("agentId".to_string(), v)].into_iter().collect(),
        }),
    };
    let err = decode_request(Codec::Proto, &req.encode_to_vec()).unwrap_err();
    assert_eq!(err.code, Code::InvalidArgument, "{}", err.message);
    // Drop the deep value iteratively is not needed: 2000 levels fit the test stack.
    let deep = format!("{}1{}", "[".repeat(5000), "]".repeat(5000));
    let body = format!(
        r#"{{"substore":"runEvents","method":"append","input":{{"runId":"r","eventType":"e","payload":{deep}}}}}"#
    );
    let err = decode_request(Codec::Json, body.as_bytes()).unwrap_err();
    assert_eq!(err.code, Code::InvalidArgument);
    assert!(err.message.contains("nested deeper"), "{}", err.message);
}
