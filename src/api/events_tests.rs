//! The mapping of stored events to stream events, event by event.

use super::*;

fn ev(seq: u64, message: &Value) -> StoredEvent {
    StoredEvent {
        seq,
        created_at_ms: 1000 + seq as i64 * 10,
        payload: json!({"schemaVersion": 1, "type": "sdk_message", "message": message.clone()}),
    }
}

#[test]
fn a_tool_turn_maps_to_the_spec_types() {
    let run = json!({"agentId": "a1", "model": {"id": "composer-2"}});
    let mut m = RunMapper::new(&run, vec![]);
    let events = [
        json!({"type": "request"}),
        json!({"type": "status", "status": "RUNNING"}),
        json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "hi"}]}}),
        json!({"type": "tool_call", "call_id": "c1", "name": "mcp", "status": "running", "args": {"toolName": "echo"}}),
        json!({"type": "tool_call", "call_id": "c1", "name": "mcp", "status": "completed", "args": {"toolName": "echo"}, "result": {"status": "success"}}),
        json!({"type": "usage", "usage": {"totalTokens": 3}}),
        json!({"type": "status", "status": "FINISHED"}),
    ];
    let out: Vec<Durable> = events
        .into_iter()
        .enumerate()
        .map(|(i, e)| m.map(&ev(i as u64 + 1, &e)))
        .collect();
    let json = event_json(&out[0], 1, "r1", 0);
    assert!(
        json.starts_with(r#"{"type":"run_started","seq":1,"run_id":"r1","at":"1970-"#),
        "{json}"
    );
    assert!(
        json.contains(r#""agent":{"id":"a1","model":"composer-2"}"#),
        "{json}"
    );
    assert_eq!(
        out[4],
        Durable::ToolCompleted {
            tool_call_id: "c1".into(),
            tool: "echo".into(),
            outcome: "ok",
            duration_ms: Some(10),
            waited_ms: None,
            result: json!({"status": "success"}),
            truncated: false,
        }
    );
    match &out[6] {
        Durable::Completed {
            status,
            output,
            usage,
        } => {
            assert_eq!(status, "finished");
            assert_eq!(output.as_deref(), Some("hi"));
            assert_eq!(usage["totalTokens"], 3);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn tool_values_over_64_kib_are_cut_and_marked() {
    let mut m = RunMapper::new(&json!({"agentId": "a1"}), vec![]);
    let big = "é".repeat(40_000);
    let started = m.map(&ev(1, &json!({"type": "tool_call", "call_id": "c1", "name": "mcp", "status": "running", "args": {"toolName": "echo", "args": {"text": big}}})));
    let Durable::ToolStarted {
        arguments,
        truncated,
        ..
    } = started
    else {
        panic!("{started:?}")
    };
    assert!(truncated);
    let cut = arguments.as_str().unwrap();
    assert!(cut.len() <= FULL_VALUE_BYTES && cut.len() > FULL_VALUE_BYTES - 4);
    assert!(cut.starts_with(r#"{"text":"éé"#), "{}", &cut[..20]);
    let small = m.map(&ev(2, &json!({"type": "tool_call", "call_id": "c2", "name": "read", "status": "running", "args": {"path": "a"}})));
    assert!(
        matches!(small, Durable::ToolStarted { arguments, truncated: false, .. } if arguments == json!({"path": "a"}))
    );
}

#[test]
fn a_failed_run_carries_the_bridge_text_and_its_code() {
    let p = run_problem(Some("[resource_exhausted] fake backend: rate limited"));
    assert_eq!(p.code, ProblemCode::ResourceExhausted);
    assert_eq!(p.detail, "[resource_exhausted] fake backend: rate limited");
    assert_eq!(run_problem(Some("boom")).code, ProblemCode::Internal);
}
