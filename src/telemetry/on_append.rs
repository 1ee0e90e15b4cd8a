//! [`Appended`]: the events of open runs that their traces are built from, kept as the store
//! RPC commits them, so that a run's end needs no read of its events (issue 39: reading each
//! finished run back cost 1.53× the instructions per append).
//!
//! Only what a trace is made of is kept: the events that name a tool call, usage or a
//! status, parsed; of the assistant messages, the latest one's text as it came (the run's
//! output is its last assistant message), parsed at the end. Everything else (thinking,
//! most assistant messages, tasks) is only counted: its seq, found at a fixed place of the
//! stored event document, without parsing it. The test is a search of the document for
//! those words as JSON strings (`"tool_call"`, ...), so an event that only mentions one is
//! kept too, harmlessly; an event of those types always contains its type as such a string.
//!
//! A tool call's event is kept slim unless content is captured (`capture_content`, off by
//! default): of its message only what the spans are made of (call id, name, the MCP tool's
//! name, status, the result's status and `isError`) is read, and its arguments and result,
//! often kilobytes, are skipped without being built into values; they would reach no span.
//! Anything of an unexpected shape is parsed whole, as before, so the trace is the same.
//!
//! A run is traced from what was kept only if every seq from 1 to its last was seen (a run
//! that began before a restart, or whose events went through another daemon, was not):
//! otherwise, or when a run keeps more than [`MAX_BYTES`], or more than [`MAX_OPEN`] runs are
//! open, it is read back at its end as before (`collect::run_trace`).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::marker::PhantomData;
use std::sync::Mutex;

use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::api::events::StoredEvent;
use crate::api::reader::stored_event_of;
use crate::store::Namespace;

/// Runs kept at once; the runs beyond are read back at their end.
pub const MAX_OPEN: usize = 4096;
/// Bytes of event documents one run keeps at most (tool results can be large); beyond, it
/// is read back at its end.
pub const MAX_BYTES: usize = 4 << 20;

/// The events of a trace: a tool call, usage or status; an assistant message's are kept
/// apart (only the latest).
const KEPT: [&str; 3] = ["\"tool_call\"", "\"usage\"", "\"status\""];
const ASSISTANT: &str = "\"assistant\"";

/// What is kept of each open run, by namespace and run id.
#[derive(Default)]
pub struct Appended {
    runs: Mutex<HashMap<Namespace, HashMap<String, Run>>>,
    /// Spans carry arguments and results: tool calls are kept whole.
    capture_content: bool,
}

#[derive(Default)]
struct Run {
    /// Bit `seq` set: seen.
    seen: Vec<u64>,
    last_seq: u64,
    first_at_ms: Option<i64>,
    events: BTreeMap<u64, StoredEvent>,
    /// The latest assistant message not in `events`: its seq and its document.
    assistant: Option<(u64, String)>,
    bytes: usize,
    /// Over [`MAX_BYTES`]: read back at its end.
    overflowed: bool,
}

/// A run's kept events, complete: in seq order, and when its first event was stored.
pub struct Kept {
    pub events: Vec<StoredEvent>,
    pub first_at_ms: i64,
}

impl std::fmt::Debug for Appended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Appended")
    }
}

impl Appended {
    pub fn new(capture_content: bool) -> Self {
        Appended {
            capture_content,
            ..Appended::default()
        }
    }

    /// Event document `doc` (`runEvents.append`'s answer) of run `run_id` was committed.
    /// Called on the store call's task: a lookup, and a parse only of the events kept.
    pub fn appended(&self, ns: &Namespace, run_id: &str, doc: &str) {
        let Some((seq, at)) = header(doc) else {
            return;
        };
        let parsed = if KEPT.iter().any(|w| doc.contains(w)) {
            let slim = (!self.capture_content)
                .then(|| slim_tool_call(doc))
                .flatten();
            match slim {
                Some(payload) => Some(StoredEvent {
                    seq,
                    created_at_ms: at,
                    payload,
                }),
                None => match stored_event_of(doc) {
                    Ok(ev) => Some(ev),
                    Err(_) => return,
                },
            }
        } else {
            None
        };
        let assistant = parsed.is_none() && doc.contains(ASSISTANT);
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        let open: usize = runs.values().map(HashMap::len).sum();
        let of_ns = runs.entry(ns.clone()).or_default();
        let run = match of_ns.get_mut(run_id) {
            Some(run) => run,
            None if open < MAX_OPEN => of_ns.entry(run_id.to_string()).or_default(),
            None => return,
        };
        run.see(seq);
        if seq == 1 {
            run.first_at_ms = Some(at);
        }
        if run.overflowed {
            return;
        }
        if let Some(ev) = parsed {
            run.bytes += doc.len();
            run.events.insert(seq, ev);
        } else if assistant && run.assistant.as_ref().is_none_or(|(s, _)| *s < seq) {
            let old = run.assistant.replace((seq, doc.to_string()));
            run.bytes = run.bytes + doc.len() - old.map_or(0, |(_, d)| d.len());
        }
        if run.bytes > MAX_BYTES {
            run.overflowed = true;
            run.events.clear();
            run.assistant = None;
        }
    }

    /// Takes what was kept of the run (it ended): `None` unless every event from seq 1 to
    /// its last was seen and kept.
    pub fn take(&self, ns: &Namespace, run_id: &str) -> Option<Kept> {
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        let of_ns = runs.get_mut(ns)?;
        let run = of_ns.remove(run_id)?;
        if of_ns.is_empty() {
            runs.remove(ns);
        }
        drop(runs);
        run.complete()
    }
}

impl Run {
    fn see(&mut self, seq: u64) {
        let (word, bit) = ((seq / 64) as usize, seq % 64);
        if self.seen.len() <= word {
            self.seen.resize(word + 1, 0);
        }
        self.seen[word] |= 1 << bit;
        self.last_seq = self.last_seq.max(seq);
    }

    fn seen(&self, seq: u64) -> bool {
        self.seen
            .get((seq / 64) as usize)
            .is_some_and(|w| w & (1 << (seq % 64)) != 0)
    }

    fn complete(mut self) -> Option<Kept> {
        if self.overflowed || self.last_seq == 0 || !(1..=self.last_seq).all(|s| self.seen(s)) {
            return None;
        }
        if let Some((seq, doc)) = self.assistant.take() {
            self.events.insert(seq, stored_event_of(&doc).ok()?);
        }
        Some(Kept {
            events: self.events.into_values().collect(),
            first_at_ms: self.first_at_ms?,
        })
    }
}

/// The seq and `createdAt` of a stored event document, read at their fixed places
/// (`store::event_doc`: `{"runId":…,"seq":N,…,"createdAt":N}`) without parsing the payload.
fn header(doc: &str) -> Option<(u64, i64)> {
    let after_seq = &doc[doc.find(r#","seq":"#)? + 7..];
    let seq = after_seq[..after_seq.find(|c: char| !c.is_ascii_digit())?]
        .parse()
        .ok()?;
    let at = doc.strip_suffix('}')?;
    let at = &at[at.rfind(r#","createdAt":"#)? + 13..];
    Some((seq, at.parse().ok()?))
}

/// The payload of a `tool_call` event with only what a span without content is made of, or
/// `None` (parse it whole) if `doc` is anything else or of another shape than expected:
/// not a tool call, a field of an unexpected type or repeated, the built-in `update_plan`
/// (whose arguments decide whether it is a plan).
fn slim_tool_call(doc: &str) -> Option<Value> {
    if doc.contains("\"update_plan\"") {
        return None;
    }
    let d: SlimDoc = serde_json::from_str(doc).ok()?;
    let Obj(p) = d.payload?;
    let Obj(m) = p.message?;
    if m.kind.as_deref() != Some("tool_call") {
        return None;
    }
    let mut message = Map::new();
    let mut put = |k: &str, v: Option<Cow<str>>| {
        if let Some(v) = v {
            message.insert(k.to_string(), Value::String(v.into_owned()));
        }
    };
    put("type", m.kind);
    put("call_id", m.call_id);
    put("name", m.name);
    put("status", m.status);
    if let Some(Obj(a)) = m.args {
        message.insert("args".into(), json!({ "toolName": a.tool_name }));
    }
    if let Some(Obj(r)) = m.result {
        let value = r.value.map(|Obj(v)| json!({ "isError": v.is_error }));
        message.insert(
            "result".into(),
            json!({ "status": r.status, "value": value }),
        );
    }
    Some(json!({ "type": p.kind, "message": message }))
}

/// A JSON object (never an array, which a derived struct would also take) as `T`.
struct Obj<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Obj<T>, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(Obj)
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

// Unknown fields are skipped (serde's `IgnoredAny`: scanned, nothing built); a known one
// of another type, or twice, fails the slim parse. `null` reads as absent, as the mapper's
// `as_str` reads it.
#[derive(Deserialize)]
struct SlimDoc<'a> {
    #[serde(borrow)]
    payload: Option<Obj<SlimPayload<'a>>>,
}

#[derive(Deserialize)]
struct SlimPayload<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    message: Option<Obj<SlimTool<'a>>>,
}

#[derive(Deserialize)]
struct SlimTool<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    call_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    status: Option<Cow<'a, str>>,
    #[serde(borrow)]
    args: Option<Obj<SlimArgs<'a>>>,
    #[serde(borrow)]
    result: Option<Obj<SlimResult<'a>>>,
}

#[derive(Deserialize)]
struct SlimArgs<'a> {
    #[serde(rename = "toolName", borrow)]
    tool_name: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct SlimResult<'a> {
    #[serde(borrow)]
    status: Option<Cow<'a, str>>,
    value: Option<Obj<SlimValue>>,
}

#[derive(Deserialize)]
struct SlimValue {
    #[serde(rename = "isError")]
    is_error: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(seq: u64, message: &serde_json::Value) -> String {
        let payload = json!({"type": "sdk_message", "message": message});
        format!(
            r#"{{"runId":"r","seq":{seq},"offset":"{seq}","eventType":"run_stream_event","payload":{payload},"payloadRef":null,"idempotencyKey":null,"createdAt":{}}}"#,
            1000 + seq
        )
    }

    fn turn() -> Vec<String> {
        vec![
            doc(1, &json!({"type": "request"})),
            doc(2, &json!({"type": "thinking", "text": "hmm"})),
            doc(
                3,
                &json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "first"}]}}),
            ),
            doc(
                4,
                &json!({"type": "tool_call", "call_id": "c", "name": "echo", "status": "running"}),
            ),
            doc(
                5,
                &json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "last"}]}}),
            ),
            doc(6, &json!({"type": "status", "status": "FINISHED"})),
        ]
    }

    #[test]
    fn a_whole_run_keeps_its_trace_events_and_only_the_latest_assistant_message() {
        let a = Appended::default();
        let ns = Namespace::default();
        // Out of order (concurrent appends) and one twice (an idempotent repeat).
        for d in turn().iter().rev().chain(&turn()[..1]) {
            a.appended(&ns, "r", d);
        }
        let kept = a.take(&ns, "r").unwrap();
        let seqs: Vec<u64> = kept.events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [4, 5, 6]);
        assert_eq!(kept.first_at_ms, 1001);
        assert_eq!(
            kept.events[1]
                .payload
                .pointer("/message/message/content/0/text"),
            Some(&json!("last"))
        );
        assert!(a.take(&ns, "r").is_none(), "taken once");
    }

    #[test]
    fn a_run_with_a_seq_not_seen_is_read_back() {
        let a = Appended::default();
        let ns = Namespace::default();
        for d in turn().iter().filter(|d| !d.contains(r#""seq":2,"#)) {
            a.appended(&ns, "r", d);
        }
        assert!(a.take(&ns, "r").is_none());
        // Seen from seq 2 only (began before a restart): read back too.
        for d in &turn()[1..] {
            a.appended(&ns, "r", d);
        }
        assert!(a.take(&ns, "r").is_none());
    }

    #[test]
    fn a_tool_call_is_kept_without_its_arguments_and_result_unless_content_is_captured() {
        let call = json!({"type": "tool_call", "call_id": "c", "name": "mcp", "status": "completed",
            "args": {"providerIdentifier": "p", "toolName": "echo", "args": {"text": "ping"}},
            "result": {"status": "success", "value": {"content": [{"text": "pong"}], "isError": true}}});
        let d = doc(1, &call);
        let slim = json!({"type": "sdk_message", "message": {"type": "tool_call", "call_id": "c",
            "name": "mcp", "status": "completed", "args": {"toolName": "echo"},
            "result": {"status": "success", "value": {"isError": true}}}});
        assert_eq!(slim_tool_call(&d), Some(slim.clone()));
        let ns = Namespace::default();
        for (capture, payload) in [
            (false, slim),
            (true, json!({"type": "sdk_message", "message": call})),
        ] {
            let a = Appended::new(capture);
            a.appended(&ns, "r", &d);
            assert_eq!(a.take(&ns, "r").unwrap().events[0].payload, payload);
        }
        // Missing fields stay missing (or null: the mapper reads both as absent).
        let bare = doc(
            1,
            &json!({"type": "tool_call", "call_id": "c", "status": "running"}),
        );
        assert_eq!(
            slim_tool_call(&bare),
            Some(
                json!({"type": "sdk_message", "message": {"type": "tool_call", "call_id": "c", "status": "running"}})
            )
        );
    }

    #[test]
    fn a_tool_call_of_another_shape_is_parsed_whole() {
        for message in [
            json!({"type": "tool_call", "call_id": 7, "name": "echo"}),
            json!({"type": "tool_call", "call_id": "c", "result": {"value": [true]}}),
            json!({"type": "tool_call", "call_id": "c", "args": ["echo"]}),
            json!({"type": "tool_call", "call_id": "c", "name": "update_plan", "args": {"plan": []}}),
            json!({"type": "assistant", "text": "a \"tool_call\""}),
        ] {
            assert_eq!(slim_tool_call(&doc(1, &message)), None, "{message}");
        }
    }

    #[test]
    fn the_header_is_read_without_the_payload() {
        let d = doc(12, &json!({"type": "thinking", "text": "\",\"seq\":99"}));
        assert_eq!(header(&d), Some((12, 1012)));
        assert_eq!(header("{}"), None);
    }
}
