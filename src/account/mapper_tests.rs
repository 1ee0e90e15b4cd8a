//! The mapping of stored events to stream events, event by event.

use super::*;
use crate::account::durable::event_json;
use crate::account::problem::ProblemCode;

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
    let mut m = RunMapper::new(&run, Beside::default());
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
            arguments: Value::Null,
            requested_arguments: None,
            result: json!({"status": "success"}),
            truncated: false,
            decision: None,
            question: None,
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
    let mut m = RunMapper::new(&json!({"agentId": "a1"}), Beside::default());
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

#[test]
fn a_call_open_when_its_run_ends_is_closed_cancelled_before_the_end() {
    let mut m = RunMapper::new(&json!({"agentId": "a1"}), Beside::default());
    m.map(&ev(1, &json!({"type": "tool_call", "call_id": "c1", "name": "mcp", "status": "running", "args": {"toolName": "deploy", "args": {"version": "1"}}})));
    assert!(m.take_closed().is_empty());
    let end = m.map(&ev(2, &json!({"type": "status", "status": "CANCELLED"})));
    assert!(end.is_terminal());
    let closed = m.take_closed();
    assert_eq!(closed.len(), 1, "{closed:?}");
    let Durable::ToolCompleted {
        tool_call_id,
        outcome,
        arguments,
        ..
    } = &closed[0]
    else {
        panic!("{closed:?}")
    };
    assert_eq!((tool_call_id.as_str(), *outcome), ("c1", "cancelled"));
    assert_eq!(arguments, &json!({"version": "1"}));
    assert_eq!(m.calls()[0].outcome, "cancelled");
}

#[test]
fn a_completion_stored_after_the_run_ended_is_not_a_second_call() {
    // Seen with the real bridge: a held call answered by the run's cancel has its completion
    // stored after the CANCELLED status.
    let mut m = RunMapper::new(&json!({"agentId": "a1"}), Beside::default());
    m.map(&ev(1, &json!({"type": "tool_call", "call_id": "c1", "name": "mcp", "status": "running", "args": {"toolName": "deploy", "args": {}}})));
    m.map(&ev(2, &json!({"type": "status", "status": "CANCELLED"})));
    m.map(&ev(3, &json!({"type": "tool_call", "call_id": "c1", "name": "mcp", "status": "completed", "result": {"status": "success"}})));
    assert_eq!(m.calls().len(), 1, "{:?}", m.calls());
    assert_eq!(m.calls()[0].outcome, "cancelled");
}

#[test]
fn a_call_cut_off_before_its_run_ended_is_unknown_not_cancelled() {
    use crate::store::records::{ToolCallRecord, ToolOutcome};
    // The daemon was killed while the call ran; the next one recorded it interrupted (at
    // 1015), and the bridge stored no completion before the run finished (at 1020).
    let record = |ended_at_ms| ToolCallRecord {
        agent_id: "a1".into(),
        run_id: Some("r1".into()),
        tool_call_id: Some("c1".into()),
        tool: "deploy".into(),
        started_at_ms: 1010,
        ended_at_ms: Some(ended_at_ms),
        outcome: ToolOutcome::Interrupted,
        cut_off: true,
        waited_ms: None,
        arguments: None,
        result: None,
    };
    let beside = |ended_at_ms| Beside {
        tool_calls: vec![record(ended_at_ms)],
        approvals: vec![],
    };
    let start = json!({"type": "tool_call", "call_id": "c1", "name": "mcp", "status": "running", "args": {"toolName": "deploy", "args": {}}});
    let mut m = RunMapper::new(&json!({"agentId": "a1"}), beside(1015));
    m.map(&ev(1, &start));
    m.map(&ev(2, &json!({"type": "status", "status": "FINISHED"})));
    let closed = m.take_closed();
    assert!(
        matches!(&closed[..], [Durable::ToolOutcomeUnknown { tool_call_id, .. }] if tool_call_id == "c1"),
        "{closed:?}"
    );
    let call = &m.calls()[0];
    assert!(call.cut_off, "{call:?}");
    assert_eq!((call.outcome, call.duration_ms), ("cancelled", Some(5)));
    // Recorded only after the run's end: every reader was told `cancelled` at the end, and a
    // replay tells the same.
    let mut m = RunMapper::new(&json!({"agentId": "a1"}), beside(1030));
    m.map(&ev(1, &start));
    m.map(&ev(2, &json!({"type": "status", "status": "FINISHED"})));
    let closed = m.take_closed();
    assert!(
        matches!(
            &closed[..],
            [Durable::ToolCompleted {
                outcome: "cancelled",
                ..
            }]
        ),
        "{closed:?}"
    );
    assert!(!m.calls()[0].cut_off);
}

#[test]
fn an_edited_call_tells_what_ran_and_what_was_asked() {
    use crate::store::approvals::ApprovalRecord;
    use crate::store::records::{ToolCallRecord, ToolOutcome};
    let record = ToolCallRecord {
        agent_id: "a1".into(),
        run_id: Some("r1".into()),
        tool_call_id: Some("c1".into()),
        tool: "deploy".into(),
        started_at_ms: 5000,
        ended_at_ms: Some(5040),
        outcome: ToolOutcome::Ok,
        cut_off: false,
        waited_ms: Some(3000),
        arguments: Some(json!({"version": "1.4.2-hotfix1"})),
        result: Some(json!({"deployed": "1.4.2-hotfix1"})),
    };
    let approval = ApprovalRecord {
        id: "ap1".into(),
        ns: crate::store::Namespace::default(),
        agent_id: "a1".into(),
        run_id: Some("r1".into()),
        tool: "deploy".into(),
        tool_call_id: Some("c1".into()),
        args: json!({"version": "1.4.2"}),
        created_at_ms: 2000,
        expires_at_ms: 9000,
        state: "approved".into(),
        decided_by: Some("default/alice".into()),
        decided_at_ms: Some(5000),
        reason: None,
        owner: "x".into(),
        lease_until_ms: 0,
        approved_args: Some(json!({"version": "1.4.2-hotfix1"})),
        confirm: false,
    };
    let mut m = RunMapper::new(
        &json!({"agentId": "a1"}),
        Beside {
            tool_calls: vec![record],
            approvals: vec![approval],
        },
    );
    m.map(&ev(1, &json!({"type": "tool_call", "call_id": "c1", "name": "mcp", "status": "running", "args": {"toolName": "deploy", "args": {"version": "1.4.2"}}})));
    let done = m.map(&ev(2, &json!({"type": "tool_call", "call_id": "c1", "name": "mcp", "status": "completed", "args": {"toolName": "deploy", "args": {"version": "1.4.2"}}, "result": {"status": "success", "value": {"content": [{"text": {"text": "{\"deployed\":\"1.4.2-hotfix1\"}"}}], "isError": false}}})));
    let json = event_json(&done, 2, "r1", 0);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        v["arguments"],
        json!({"version": "1.4.2-hotfix1"}),
        "{json}"
    );
    assert_eq!(
        v["requested_arguments"],
        json!({"version": "1.4.2"}),
        "{json}"
    );
    assert_eq!(v["result"], json!({"deployed": "1.4.2-hotfix1"}), "{json}");
    assert_eq!(v["outcome"], "ok");
    assert_eq!(
        (v["duration_ms"].as_i64(), v["waited_ms"].as_i64()),
        (Some(40), Some(3000))
    );
    assert_eq!(v["decision"]["by"], "default/alice");
    assert_eq!(v["decision"]["edited"], true);
    assert_eq!(m.calls()[0].result, json!({"deployed": "1.4.2-hotfix1"}));
}

#[test]
fn the_text_bound_is_never_below_the_text() {
    let values = [
        json!(null),
        json!(true),
        json!(-1.5e300),
        json!(u64::MAX),
        json!("a\u{1}\"\\é"),
        json!([1, "x", {"k\n": [null, {}]}, []]),
        json!({"content": [{"text": {"text": "x".repeat(3000)}}], "isError": false}),
    ];
    for v in values {
        let text = v.to_string().len();
        let bound = text_bound(&v, usize::MAX).unwrap();
        assert!(bound >= text, "{v}: {bound} < {text}");
        assert_eq!(text_bound(&v, text - 1).filter(|&b| b < text), None);
    }
    // Past the cap the value is cut, as before.
    let (cut, truncated) = capped(json!("y".repeat(FULL_VALUE_BYTES)));
    assert!(truncated);
    assert_eq!(cut.as_str().map(str::len), Some(FULL_VALUE_BYTES));
}
