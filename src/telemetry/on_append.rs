//! [`Appended`]: the events of open runs that their traces are built from, kept as the store
//! RPC commits them, so that a run's end needs no read of its events (issue 39: reading each
//! finished run back cost 1.53× the instructions per append).
//!
//! Only what a trace is made of is kept: the events that are a tool call, usage or a
//! status, parsed (a tool call, when no content is exported, with only the fields that tell
//! how it ended: `account::glance`); of the assistant messages, the latest one's text as it
//! came (the run's output is its last assistant message), parsed at the end. Everything
//! else (thinking, most assistant messages, tasks) is only counted. An event's kind is read
//! from its message's `type` by skimming the document's structure, not by parsing it.
//!
//! A run is traced from what was kept only if every seq from 1 to its last was seen (a run
//! that began before a restart, or whose events went through another daemon, was not):
//! otherwise, or when a run keeps more than [`MAX_BYTES`], or more than [`MAX_OPEN`] runs are
//! open, it is read back at its end as before (`collect::run_trace`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use crate::account::{glance, stored_event_of, Glance, StoredEvent};
use crate::store::event_doc::head;
use crate::store::Namespace;

/// Runs kept at once; the runs beyond are read back at their end.
pub const MAX_OPEN: usize = 4096;
/// Bytes of event documents one run keeps at most (tool results can be large); beyond, it
/// is read back at its end.
pub const MAX_BYTES: usize = 4 << 20;

/// What is kept of each open run, by namespace and run id.
#[derive(Default)]
pub struct Appended {
    runs: Mutex<HashMap<Namespace, HashMap<String, Run>>>,
    /// Tool calls are kept whole (their arguments and results are exported).
    content: bool,
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
    /// With `content`: tool calls kept whole, for traces that export arguments and results.
    pub fn new(content: bool) -> Self {
        Appended {
            content,
            ..Default::default()
        }
    }

    /// Event document `doc` (`runEvents.append`'s answer) of run `run_id` was committed.
    /// Called on the store call's task: a lookup, and a parse only of the events kept.
    pub fn appended(&self, ns: &Namespace, run_id: &str, doc: &str) {
        let Some(head) = head(doc) else {
            return;
        };
        let (seq, at) = (head.seq, head.created_at);
        let (parsed, assistant) = match glance(doc, &head, self.content) {
            Some(Glance::Kept(ev)) => (Some(ev), false),
            Some(Glance::Assistant) => (None, true),
            Some(Glance::Other) => (None, false),
            None => return,
        };
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
}
