use super::*;

#[test]
fn names_lists_every_call_and_only_those() {
    for name in StoreCall::NAMES {
        let (sub, method) = name.split_once('.').unwrap();
        match StoreCall::parse(sub, method, "{}") {
            Ok(call) => assert_eq!(call.name(), name),
            Err(e) => assert!(!e.to_string().contains("unknown"), "{name}: {e}"),
        }
    }
    let unknown = StoreCall::parse("agents", "append", "{}").unwrap_err();
    assert!(unknown.to_string().contains("unknown"), "{unknown}");
}

fn parse(sub: &str, method: &str, input: &str) -> Result<StoreCall, String> {
    StoreCall::parse(sub, method, input).map_err(|e| e.to_string())
}

#[test]
fn agent_documents_are_kept_verbatim() {
    let doc =
        r#"{"agentId":"a1","cwd":"/ws","updatedAt":1780000000000,"x":{"y":[1,null]},"n":1.50}"#;
    let call = parse("agents", "create", &format!(r#"{{"agent":{doc}}}"#)).unwrap();
    let StoreCall::AgentsCreate(a) = call else {
        panic!()
    };
    assert_eq!(a.json.as_str(), doc);
    assert_eq!(a.agent_id, "a1");
    assert_eq!(a.updated_at, 1_780_000_000_000.0);
}

#[test]
fn wrong_types_are_named() {
    assert_eq!(
        parse("agents", "get", r#"{"agentId":5}"#).unwrap_err(),
        "input.agentId must be a string"
    );
    assert_eq!(
        parse("agents", "get", "{}").unwrap_err(),
        "input.agentId is required"
    );
    assert_eq!(
        parse("agents", "create", r#"{"agent":[]}"#).unwrap_err(),
        "input.agent must be a JSON object"
    );
    assert_eq!(
        parse("runs", "create", r#"{"run":{"agentId":"a"}}"#).unwrap_err(),
        "run.runId is required"
    );
    assert_eq!(
        parse(
            "checkpoints",
            "create",
            r#"{"agentId":"a","blobId":"b","data":"@@"}"#
        )
        .unwrap_err()
        .split(':')
        .next()
        .unwrap(),
        "input.data is not valid base64"
    );
    assert!(parse("agents", "list", r#"{"filter":{"limit":-1}}"#).is_err());
    assert!(parse("agents", "list", r#"{"filter":{"limit":1.5}}"#).is_err());
    assert!(parse("runs", "list", r#"{"filter":{"agentIds":"a"}}"#).is_err());
}

#[test]
fn duplicate_keys_are_refused_where_they_are_read() {
    for (sub, method, input) in [
        ("agents", "get", r#"{"agentId":"a","agentId":"b"}"#),
        ("agents", "get", r#"{"agentId":"a","agent\u0049d":"b"}"#),
        (
            "runs",
            "delete",
            r#"{"filter":{"runIds":["r"],"runIds":null}}"#,
        ),
        (
            "runs",
            "delete",
            r#"{"filter":{},"filter":{"runIds":["r"]}}"#,
        ),
        (
            "agents",
            "create",
            r#"{"agent":{"agentId":"a","cwd":"/","cwd":"/x"}}"#,
        ),
    ] {
        let err = parse(sub, method, input).unwrap_err();
        assert!(err.contains("duplicate key"), "{input}: {err}");
    }
    // Inside a document's own values nothing is read, so nothing is refused.
    let doc = r#"{"agent":{"agentId":"a","cwd":"/","x":{"k":1,"k":2}}}"#;
    assert!(parse("agents", "create", doc).is_ok());
}

#[test]
fn deletes_need_an_object_filter() {
    for sub in ["agents", "runs", "runEvents", "checkpoints"] {
        assert!(parse(sub, "delete", "{}").is_err(), "{sub}");
        assert!(
            parse(sub, "delete", r#"{"filter":"all"}"#).is_err(),
            "{sub}"
        );
        assert!(parse(sub, "delete", r#"{"filter":[]}"#).is_err(), "{sub}");
        assert!(parse(sub, "delete", r#"{"filter":{}}"#).is_ok(), "{sub}");
    }
}

#[test]
fn after_offset_is_exclusive_and_strict() {
    let list = |o: &str| {
        parse(
            "runEvents",
            "list",
            &format!(r#"{{"runId":"r","afterOffset":{o}}}"#),
        )
    };
    assert!(matches!(
        list(r#""7""#).unwrap(),
        StoreCall::EventsList { after_seq: 7, .. }
    ));
    assert!(matches!(
        list(r#""""#).unwrap(),
        StoreCall::EventsList { after_seq: 0, .. }
    ));
    assert!(matches!(
        list("null").unwrap(),
        StoreCall::EventsList {
            after_seq: 0,
            limit: 100,
            ..
        }
    ));
    for bad in [
        r#""x""#,
        r#""-1""#,
        r#""1.5""#,
        r#""99999999999999999999999""#,
        "true",
    ] {
        assert!(
            list(bad)
                .unwrap_err()
                .starts_with("invalid run event offset"),
            "{bad}"
        );
    }
}

#[test]
fn empty_lists_do_not_constrain_and_empty_cursor_is_absent() {
    let call = parse("runs", "list", r#"{"filter":{"agentIds":[],"cursor":""}}"#).unwrap();
    assert_eq!(
        call,
        StoreCall::RunsList(
            RunFilter::default(),
            Page {
                cursor: None,
                limit: 50
            }
        )
    );
}

#[test]
fn unknown_substores_and_methods_are_named() {
    assert!(parse("agentz", "get", "{}")
        .unwrap_err()
        .contains("unknown substore \"agentz\""));
    assert!(parse("runEvents", "get", "{}")
        .unwrap_err()
        .contains("append, list, delete"));
}
