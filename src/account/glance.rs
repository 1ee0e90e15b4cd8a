//! [`glance`]: what kind of event a stored event document is, and a tool call's event with
//! only what the account reads of it when no content is told, without parsing the rest of
//! the document.
//!
//! For the traces (`telemetry::on_append`): they see every appended event, keep the few
//! kinds a trace is made of, and export no arguments or results unless `capture_content`
//! is set. Parsing each document whole (tool results are kilobytes) or searching it for
//! the words of those kinds was most of telemetry's cost per append (issue 39). The fields
//! kept here are those [`RunMapper::tool_call`](super::RunMapper) reads to tell how a call
//! ended; a change there that reads another field belongs here too (the tests map both and
//! compare).

use serde_json::{Map, Value};

use super::stored::{stored_event_of, StoredEvent};
use crate::json_skim::{member, members, string, string_len, value};
use crate::store::event_doc::Head;
use crate::tools::builtin::update_plan;

/// An event document's kind, as far as a trace cares.
pub enum Glance {
    /// A `tool_call`, `usage` or `status` message: a trace is made of these.
    Kept(StoredEvent),
    /// An `assistant` message: the run's output is its last one.
    Assistant,
    /// Anything else (thinking, tasks, a payload that is no SDK message).
    Other,
}

/// The kind of event document `doc` (a `runEvents.append` answer; `head`, its
/// `store::event_doc::head`), and the event when a trace is made of it: parsed whole, or with
/// `content` false a tool call with only the fields the account reads to tell how it ended.
/// `None` if a kept event's document does not parse.
pub fn glance(doc: &str, head: &Head<'_>, content: bool) -> Option<Glance> {
    let payload = head.payload_onwards;
    let message = match sdk_envelope(payload) {
        Some(message) => message,
        None => match envelope_and_message(payload) {
            Some(message) => message,
            None => return Some(Glance::Other),
        },
    };
    let kind = member(message, "type").and_then(string);
    Some(match kind.as_deref() {
        Some("tool_call") if !content => Glance::Kept(StoredEvent {
            seq: head.seq,
            created_at_ms: head.created_at,
            payload: object([
                ("type", Value::String("sdk_message".into())),
                ("message", slim_tool_call(message)),
            ]),
        }),
        Some("tool_call" | "usage" | "status") => Glance::Kept(stored_event_of(doc).ok()?),
        Some("assistant") => Glance::Assistant,
        _ => Glance::Other,
    })
}

/// The message of a payload in the envelope exactly as the SDK writes it
/// (`{"schemaVersion":1,"type":"sdk_message","agentId":…,"runId":…,"message":…}`: the bridge
/// sends JSON, whose key order it keeps), read by its literals: the message's start, with no
/// member loop. `None` for any other text (then [`envelope_and_message`] reads it).
fn sdk_envelope(payload: &str) -> Option<&str> {
    let rest = payload.strip_prefix(r#"{"schemaVersion":1,"type":"sdk_message","agentId":"#)?;
    let rest = rest[string_len(rest)?..].strip_prefix(r#","runId":"#)?;
    rest[string_len(rest)?..].strip_prefix(r#","message":"#)
}

/// The message of a payload whose `type` is `sdk_message`, its members in any order.
fn envelope_and_message(payload: &str) -> Option<&str> {
    // The SDK's envelope puts `message` last: the loop stops at its start, and the message's
    // `type` is its first key, so an event's kind is read without scanning its content.
    let (mut envelope, mut message) = (None, None);
    for (key, tail) in members(payload) {
        match key {
            "type" => envelope = Some(value(tail)),
            "message" => message = Some(tail),
            _ => continue,
        }
        if envelope.is_some() && message.is_some() {
            break;
        }
    }
    let (envelope, message) = (envelope?, message?);
    (string(envelope).as_deref() == Some("sdk_message")).then_some(message)
}

/// A `tool_call` message's text -> the message with its type, call id, name and status, the
/// custom tool's name (`args.toolName`), how its result says it ended (`result.status`,
/// `result.value.isError`), and the arguments only of the plan tool (the account tells a
/// valid plan as a plan, not as a call).
fn slim_tool_call(message: &str) -> Value {
    let parse = |tail: &str| serde_json::from_str::<Value>(value(tail)).unwrap_or(Value::Null);
    let mut out = Map::new();
    let (mut args, mut result) = (None, None);
    for (key, tail) in members(message) {
        match key {
            "type" | "call_id" | "name" | "status" => {
                let text = value(tail);
                let v = match string(text) {
                    Some(s) => Value::String(s.into_owned()),
                    None => serde_json::from_str(text).unwrap_or(Value::Null),
                };
                out.insert(key.to_string(), v);
            }
            "args" => args = Some(tail),
            "result" => result = Some(tail),
            _ => continue,
        }
        // All found: stop before the next member would skip over the last one (the result,
        // kilobytes, is then scanned once, below, not twice).
        if out.len() == 4 && args.is_some() && result.is_some() {
            break;
        }
    }
    let name = out.get("name").and_then(Value::as_str).unwrap_or_default();
    let custom = name == "mcp";
    let tool = match (custom, args) {
        (true, Some(args)) => member(args, "toolName").and_then(string),
        _ => Some(name.into()),
    };
    if let Some(args) = args {
        let slim = if tool.as_deref() == Some(update_plan::NAME) {
            parse(args)
        } else if let (true, Some(tool)) = (custom, &tool) {
            object([("toolName", Value::String(tool.to_string()))])
        } else {
            Value::Null
        };
        out.insert("args".into(), slim);
    }
    if let Some(result) = result {
        let mut slim = Map::new();
        let (mut status, mut value_seen) = (false, false);
        for (key, tail) in members(result) {
            match key {
                "status" => {
                    slim.insert("status".into(), parse(tail));
                    status = true;
                }
                "value" => {
                    value_seen = true;
                    if let Some(is_error) = member(tail, "isError") {
                        let is_error = serde_json::from_str(is_error).unwrap_or(Value::Null);
                        slim.insert("value".into(), object([("isError", is_error)]));
                    }
                }
                _ => {}
            }
            // Both read: the value (the tool's output) is not skimmed a second time.
            if status && value_seen {
                break;
            }
        }
        out.insert("result".into(), Value::Object(slim));
    }
    Value::Object(out)
}

/// A JSON object of these members (`json!` with a `Value` inside serializes it again).
fn object<const N: usize>(members: [(&str, Value); N]) -> Value {
    Value::Object(
        members
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::account::{Beside, Durable, RunMapper};
    use serde_json::json;

    fn doc(seq: u64, message: &Value) -> String {
        let payload = json!({"schemaVersion": 1, "type": "sdk_message", "agentId": "a", "runId": "r", "message": message});
        format!(
            r#"{{"runId":"r","seq":{seq},"offset":"{seq}","eventType":"run_stream_event","payload":{payload},"payloadRef":null,"idempotencyKey":null,"createdAt":{}}}"#,
            1000 + seq
        )
    }

    fn glance_at(doc: &str, content: bool) -> Option<Glance> {
        glance(doc, &crate::store::event_doc::head(doc)?, content)
    }

    fn kind(doc: &str) -> &'static str {
        match glance_at(doc, false) {
            Some(Glance::Kept(_)) => "kept",
            Some(Glance::Assistant) => "assistant",
            Some(Glance::Other) => "other",
            None => "none",
        }
    }

    #[test]
    fn kinds_are_read_from_the_message_type_only() {
        let t = |m: Value| kind(&doc(1, &m));
        assert_eq!(
            t(json!({"type": "thinking", "text": "\"tool_call\" \"status\""})),
            "other"
        );
        assert_eq!(
            t(json!({"text": "x", "type": "status", "status": "RUNNING"})),
            "kept"
        );
        assert_eq!(t(json!({"type": "usage", "usage": {}})), "kept");
        assert_eq!(t(json!({"type": "assistant", "message": {}})), "assistant");
        assert_eq!(t(json!({"type": "task"})), "other");
        let not_sdk = doc(1, &json!({"type": "status"})).replace("sdk_message", "other");
        assert_eq!(kind(&not_sdk), "other");
        assert_eq!(kind("{}"), "none");
    }

    /// A slim tool call maps to the same call as the whole one, but for its content.
    #[test]
    fn a_slim_tool_call_tells_what_the_whole_one_tells() {
        let big = "x".repeat(5000);
        let messages = [
            json!({"type": "tool_call", "call_id": "c1", "name": "mcp", "status": "running",
                   "args": {"providerIdentifier": "p", "toolName": "echo", "args": {"text": big}}}),
            json!({"type": "tool_call", "call_id": "c1", "name": "mcp", "status": "completed",
                   "args": {"toolName": "echo", "args": {"text": "a"}},
                   "result": {"status": "success", "value": {"content": [{"text": {"text": big}}], "isError": true}}}),
            json!({"name": "shell", "type": "tool_call", "call_id": "c2", "status": "running", "args": {"command": "ls"}}),
            json!({"type": "tool_call", "call_id": "c2", "name": "shell", "status": "completed",
                   "result": {"status": "error", "error": {"message": big}}}),
            json!({"type": "tool_call", "call_id": "c3", "name": "mcp", "status": "running",
                   "args": {"toolName": "update_plan", "args": {"items": [{"title": "a", "status": "pending"}]}}}),
            json!({"type": "status", "status": "FINISHED"}),
        ];
        let run = json!({"agentId": "a"});
        let (mut whole, mut slim) = (
            RunMapper::new(&run, Beside::default()),
            RunMapper::new(&run, Beside::default()),
        );
        let strip = |d: Durable| match d {
            Durable::ToolStarted {
                tool_call_id, tool, ..
            } => format!("started {tool_call_id} {tool}"),
            Durable::ToolCompleted {
                tool_call_id,
                tool,
                outcome,
                duration_ms,
                ..
            } => {
                format!("completed {tool_call_id} {tool} {outcome} {duration_ms:?}")
            }
            other => format!("{other:?}"),
        };
        for (i, m) in messages.iter().enumerate() {
            let d = doc(i as u64 + 1, m);
            let Some(Glance::Kept(ev)) = glance_at(&d, false) else {
                panic!("{m}")
            };
            assert_eq!((ev.seq, ev.created_at_ms), (i as u64 + 1, 1001 + i as i64));
            assert!(ev.payload.to_string().len() < 400, "{}", ev.payload);
            let full = crate::account::stored_event_of(&d).unwrap();
            assert_eq!(strip(slim.map(&ev)), strip(whole.map(&full)), "{m}");
        }
        let outcomes = |m: &RunMapper| {
            m.calls()
                .iter()
                .map(|c| (c.tool.clone(), c.outcome))
                .collect::<Vec<_>>()
        };
        assert_eq!(outcomes(&slim), outcomes(&whole));
        let expected = [
            ("echo", "error"),
            ("shell", "error"),
            ("update_plan", "cancelled"),
        ];
        assert_eq!(outcomes(&slim), expected.map(|(t, o)| (t.to_string(), o)));
    }

    #[test]
    fn the_sdk_envelope_is_read_by_its_literals_and_any_other_order_by_its_members() {
        let message = r#"{"type":"tool_call","call_id":"c","name":"x","status":"running"}"#;
        let sdk = format!(
            r#"{{"schemaVersion":1,"type":"sdk_message","agentId":"a\"","runId":"r","message":{message}}}"#
        );
        assert!(sdk_envelope(&sdk).is_some_and(|m| m.starts_with(message)));
        let sorted = format!(
            r#"{{"agentId":"a","message":{message},"runId":"r","schemaVersion":1,"type":"sdk_message"}}"#
        );
        assert_eq!(sdk_envelope(&sorted), None);
        assert!(envelope_and_message(&sorted).is_some_and(|m| m.starts_with(message)));
        assert_eq!(
            envelope_and_message(&sorted.replace("sdk_message", "x")),
            None
        );
    }

    #[test]
    fn with_content_the_event_is_parsed_whole() {
        let m = json!({"type": "tool_call", "call_id": "c", "name": "x", "status": "completed", "result": {"value": 1}});
        let Some(Glance::Kept(ev)) = glance_at(&doc(3, &m), true) else {
            panic!()
        };
        assert_eq!(ev.payload["message"], m);
    }
}
