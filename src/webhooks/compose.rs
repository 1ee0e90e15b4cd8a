//! What each event says: the store's [`Happening`]s turned into outbox rows, one per
//! endpoint that wants the event, inside the transaction that made them.
//!
//! The body is `{"type", "timestamp", "data"}` (Standard Webhooks). `data` always names the
//! `namespace`, the `session` (agent id) and the `run`, and links the run in the console
//! (`console_url`, never with a token). The `webhook-id` is derived from the event (its
//! namespace, type and subject), so a write repeated, or a transaction retried, records it
//! once.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::Endpoint;
use crate::clock::{now_ms, rfc3339_ms};
use crate::run::RunStatus;
use crate::store::approvals::ApprovalRecord;
use crate::store::outbox::{Happening, OutboxEntry};
use crate::tools::builtin::ask_user;

/// The rows for `happening`, one per endpoint that wants it.
pub fn entries(endpoints: &[Endpoint], happening: &Happening<'_>) -> Vec<OutboxEntry> {
    let Some(event) = event(happening) else {
        return Vec::new();
    };
    let now = now_ms();
    let id = event_id(&event.ns, event.kind, &event.subject);
    endpoints
        .iter()
        .filter(|e| e.config.wants(event.kind, &event.ns))
        .map(|e| {
            let mut data = event.data.clone();
            if let (Some(base), Some(run)) = (&e.console, &event.run_id) {
                data["console_url"] = Value::String(format!(
                    "{}/ui/#/runs/{}",
                    base.trim_end_matches('/'),
                    encode(run)
                ));
            }
            let body = json!({
                "type": event.kind,
                "timestamp": rfc3339_ms(now),
                "data": data,
            });
            OutboxEntry {
                id: id.clone(),
                url: e.config.url.clone(),
                ns: event.ns.clone(),
                kind: event.kind.to_string(),
                run_id: event.run_id.clone(),
                body: body.to_string(),
                created_at_ms: now,
            }
        })
        .collect()
}

/// An event before it is addressed.
struct Event {
    ns: String,
    kind: &'static str,
    /// What the event is about (an approval id, a run id): its id is derived from it.
    subject: String,
    run_id: Option<String>,
    data: Value,
}

fn event(happening: &Happening<'_>) -> Option<Event> {
    match happening {
        Happening::ApprovalRequired(rec) => Some(approval(rec, true)),
        Happening::ApprovalResolved(rec) => Some(approval(rec, false)),
        Happening::RunUpdated {
            ns,
            agent_id,
            run_id,
            doc,
        } => {
            let doc: Value = serde_json::from_str(doc).ok()?;
            let status = RunStatus::of_doc(&doc)
                .filter(|s| s.is_terminal())?
                .as_str();
            let num = |k: &str| doc.get(k).and_then(Value::as_f64);
            let duration_ms = match (num("startedAt"), num("endedAt")) {
                (Some(s), Some(e)) if e >= s => json!((e - s) as i64),
                _ => Value::Null,
            };
            let text = |k: &str| doc.get(k).filter(|v| !v.is_null()).cloned();
            Some(Event {
                ns: ns.as_str().to_string(),
                kind: "run.ended",
                subject: run_id.to_string(),
                run_id: Some(run_id.to_string()),
                data: json!({
                    "namespace": ns.as_str(),
                    "session": agent_id,
                    "run": run_id,
                    "status": status,
                    "error": text("error").unwrap_or(Value::Null),
                    "duration_ms": duration_ms,
                    "usage": text("usage").unwrap_or(Value::Null),
                }),
            })
        }
    }
}

/// `approval.required` / `approval.resolved`, or for `ask_user` `question.asked` /
/// `question.answered`.
fn approval(rec: &ApprovalRecord, required: bool) -> Event {
    let question = rec.tool == ask_user::NAME;
    let kind = match (question, required) {
        (false, true) => "approval.required",
        (false, false) => "approval.resolved",
        (true, true) => "question.asked",
        (true, false) => "question.answered",
    };
    let mut what = json!({
        "id": rec.id,
        "tool": rec.tool,
        "tool_call_id": rec.tool_call_id,
        "arguments": rec.args,
        "created_at": rfc3339_ms(rec.created_at_ms),
        "expires_at": rfc3339_ms(rec.expires_at_ms),
        "state": rec.state,
    });
    if !required {
        what["decided_by"] = json!(rec.decided_by);
        what["decided_at"] = json!(rec.decided_at_ms.map(rfc3339_ms));
        what["reason"] = json!(rec.reason);
        if question {
            // `POST /v1/runs/{run}/resume` stores the answer beside the questions.
            what["answer"] = rec
                .approved_args
                .as_ref()
                .and_then(|a| a.get("answer"))
                .cloned()
                .unwrap_or(Value::Null);
        } else if rec.approved_args.is_some() {
            what["approved_arguments"] = json!(rec.approved_args);
        }
    }
    let mut data = json!({
        "namespace": rec.ns.as_str(),
        "session": rec.agent_id,
        "run": rec.run_id,
    });
    data[if question { "question" } else { "approval" }] = what;
    Event {
        ns: rec.ns.as_str().to_string(),
        kind,
        subject: rec.id.clone(),
        run_id: rec.run_id.clone(),
        data,
    }
}

/// `s` safe in a URL's fragment path: unreserved characters kept, the rest percent-encoded.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `msg_` and 32 hex digits of the SHA-256 of the event's namespace, type and subject.
fn event_id(ns: &str, kind: &str, subject: &str) -> String {
    let digest = Sha256::digest(format!("{ns}\n{kind}\n{subject}").as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("msg_{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_has_one_id_whatever_the_endpoint_or_the_moment() {
        assert_eq!(
            event_id("default", "run.ended", "r1"),
            event_id("default", "run.ended", "r1")
        );
        assert_ne!(
            event_id("default", "run.ended", "r1"),
            event_id("other", "run.ended", "r1")
        );
        assert_ne!(
            event_id("default", "approval.required", "a1"),
            event_id("default", "approval.resolved", "a1")
        );
    }

    #[test]
    fn an_answered_question_is_told_as_one_with_its_answer() {
        let rec = ApprovalRecord {
            id: "appr_1".into(),
            ns: crate::store::Namespace::default(),
            agent_id: "a".into(),
            run_id: Some("r".into()),
            tool: ask_user::NAME.into(),
            tool_call_id: None,
            args: json!({"questions": ["Which region?"]}),
            created_at_ms: 0,
            expires_at_ms: 1,
            state: "approved".into(),
            decided_by: Some("default/api".into()),
            decided_at_ms: Some(1),
            reason: None,
            owner: "o".into(),
            lease_until_ms: 0,
            approved_args: Some(json!({"questions": ["Which region?"], "answer": "eu"})),
            confirm: false,
        };
        let e = event(&Happening::ApprovalResolved(&rec)).unwrap();
        assert_eq!(e.kind, "question.answered");
        assert_eq!(e.data["question"]["answer"], "eu");
        assert!(e.data.get("approval").is_none());
        assert_eq!(
            event(&Happening::ApprovalRequired(&rec)).unwrap().kind,
            "question.asked"
        );
    }

    #[test]
    fn only_a_terminal_status_ends_a_run() {
        let ns = crate::store::Namespace::default();
        let run = |doc: &str| {
            event(&Happening::RunUpdated {
                ns: &ns,
                agent_id: "a",
                run_id: "r",
                doc,
            })
        };
        assert!(run(r#"{"status":"running"}"#).is_none());
        assert!(run("not json").is_none());
        let e =
            run(r#"{"status":"error","error":"boom","startedAt":1000,"endedAt":3500}"#).unwrap();
        assert_eq!(e.kind, "run.ended");
        assert_eq!(e.data["error"], "boom");
        assert_eq!(e.data["duration_ms"], 2500);
        assert_eq!(e.data["session"], "a");
    }
}
