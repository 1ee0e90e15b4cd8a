//! The run event document every backend answers (`runEvents.append` and each item of
//! `runEvents.list`): `{"runId","seq","offset","eventType","payload","payloadRef",
//! "idempotencyKey","createdAt"}`, with the payload spliced in as the stored JSON text.

use super::json::{push_int, push_json_str};

/// One stored event, borrowed from wherever the backend holds it.
#[derive(Debug, Clone, Copy)]
pub struct EventFields<'a> {
    pub seq: i64,
    pub event_type: &'a str,
    /// JSON text (a [`super::JsonText`] when it was stored).
    pub payload: &'a str,
    pub payload_ref: Option<&'a str>,
    pub idempotency_key: Option<&'a str>,
    pub created_at: i64,
}

/// Writes an event document straight into `out` (a page holds up to a thousand of them, so
/// no intermediate string per event); `run_id_json` is the run id as a JSON string literal
/// (the same for every event of a page).
pub fn push_event(out: &mut String, run_id_json: &str, ev: EventFields<'_>) {
    let opt = |out: &mut String, v: Option<&str>| match v {
        Some(v) => push_json_str(out, v),
        None => out.push_str("null"),
    };
    out.push_str(r#"{"runId":"#);
    out.push_str(run_id_json);
    out.push_str(r#","seq":"#);
    push_int(out, ev.seq);
    out.push_str(r#","offset":""#);
    push_int(out, ev.seq);
    out.push_str(r#"","eventType":"#);
    push_json_str(out, ev.event_type);
    out.push_str(r#","payload":"#);
    out.push_str(ev.payload);
    out.push_str(r#","payloadRef":"#);
    opt(out, ev.payload_ref);
    out.push_str(r#","idempotencyKey":"#);
    opt(out, ev.idempotency_key);
    out.push_str(r#","createdAt":"#);
    push_int(out, ev.created_at);
    out.push('}');
}

/// `nextOffset` of an events page whose last item has `seq`.
pub fn next_offset_json(seq: i64) -> String {
    let mut s = String::with_capacity(22);
    s.push('"');
    push_int(&mut s, seq);
    s.push('"');
    s
}

pub use crate::clock::now_ms;
