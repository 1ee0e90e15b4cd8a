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

/// What the traces read of every appended event without parsing its payload (issue 39):
/// an event document written by [`push_event`], read at its fixed places.
#[derive(Debug, PartialEq)]
pub struct Head<'a> {
    pub seq: u64,
    pub created_at: i64,
    /// The document from its payload's start to its end.
    pub payload_onwards: &'a str,
}

/// The [`Head`] of event document `doc`, read in the order [`push_event`] writes it (the run
/// id and event type skipped as strings, never searched), and `createdAt`, its last member,
/// read back from the end. `None` for a document not written so.
pub fn head(doc: &str) -> Option<Head<'_>> {
    use crate::json_skim::string_len;
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let rest = doc.strip_prefix(r#"{"runId":"#)?;
    let rest = rest[string_len(rest)?..].strip_prefix(r#","seq":"#)?;
    let n = digits(rest);
    let seq = rest[..n].parse().ok()?;
    let rest = rest[n..].strip_prefix(r#","offset":""#)?;
    let rest = rest[digits(rest)..].strip_prefix(r#"","eventType":"#)?;
    let payload_onwards = rest[string_len(rest)?..].strip_prefix(r#","payload":"#)?;
    let body = doc.strip_suffix('}')?;
    let digits = body.trim_end_matches(|c: char| c.is_ascii_digit());
    let sign = usize::from(digits.ends_with('-'));
    let created_at = body[digits.len() - sign..].parse().ok()?;
    if !digits[..digits.len() - sign].ends_with(r#","createdAt":"#) {
        return None;
    }
    Some(Head {
        seq,
        created_at,
        payload_onwards,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixed_places_are_read_without_the_payload() {
        let mut doc = String::new();
        let payload = r#"{"text":"\",\"seq\":99,\"payload\":1","createdAt":5}"#;
        let ev = EventFields {
            seq: 12,
            event_type: "x\",\"payload\":",
            payload,
            payload_ref: None,
            idempotency_key: None,
            created_at: 1012,
        };
        push_event(&mut doc, r#""r,\"payload\":""#, ev);
        let h = head(&doc).unwrap();
        assert_eq!((h.seq, h.created_at), (12, 1012));
        assert!(h.payload_onwards.starts_with(payload));
        assert_eq!(head("{}"), None);
        doc.truncate(doc.len() - "1012}".len());
        doc.push_str("-5}");
        assert_eq!(head(&doc).map(|h| h.created_at), Some(-5));
    }
}
