//! Reading a few members out of JSON text without parsing the rest: the members of an
//! object as (key, value text) pairs, each value skipped over by its structure alone.
//!
//! Why: a run event's document is 0.5–3 KB, mostly one big string or object (an assistant
//! message's text, a tool call's result), and the traces need only its message type and a
//! tool call's few scalar fields (issue 39: building `serde_json::Value`s of whole tool
//! results, or searching every document for words, cost telemetry a fifth of an append).
//! Skipping a value here looks at string contents eight bytes at a time for the next `"` or
//! `\`, where a parser decodes and checks every byte.
//!
//! The text is expected to be valid JSON (documents the store answered, whose JSON it
//! checked when it was written); on text that is not, the functions stop early and give
//! less (`None`, fewer members), never panic.

/// The index of the first `"` or `\\` at or after `i` (or the end): most of a request or
/// a document is string contents, which every scan here and the request check of the store
/// RPC (`rpc::store`) runs over. The first 32 bytes are looked at eight at a time here (keys
/// and ids end there, and a call of `memchr2` costs more than such a string); the rest of a
/// long string (a text, a tool result) goes to `memchr2`, which looks at 16 or 32 bytes per
/// instruction where it can (a byte-at-a-time loop was an eighth of an append's CPU).
pub fn to_quote_or_backslash(json: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // A zero byte of `v` is a byte of the chunk equal to the one searched for. The lowest
    // flagged byte is always a real match (the classic has-zero-byte test can only add false
    // flags above a real one).
    let zero_bytes = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    for _ in 0..4 {
        let Some(chunk) = json.get(i..i + 8) else {
            while i < json.len() && json[i] != b'"' && json[i] != b'\\' {
                i += 1;
            }
            return i.min(json.len());
        };
        let w = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let hits =
            zero_bytes(w ^ (ONES * u64::from(b'"'))) | zero_bytes(w ^ (ONES * u64::from(b'\\')));
        if hits != 0 {
            return i + (hits.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    memchr::memchr2(b'"', b'\\', &json[i..]).map_or(json.len(), |k| i + k)
}

/// The index after the string whose opening quote is at `i` (the end of the text if it
/// never closes).
fn string_end(json: &[u8], i: usize) -> usize {
    string_close(json, i).unwrap_or(json.len())
}

/// The index after the closing quote of the string whose opening quote is at `i`.
fn string_close(json: &[u8], i: usize) -> Option<usize> {
    let mut i = i + 1;
    loop {
        i = to_quote_or_backslash(json, i);
        match json.get(i)? {
            b'"' => return Some(i + 1),
            _ => i += 2,
        }
    }
}

/// The length of the JSON string that starts `text`, quotes included (`None` if `text` does
/// not start with one, or it never closes).
pub fn string_len(text: &str) -> Option<usize> {
    let json = text.as_bytes();
    if json.first() != Some(&b'"') {
        return None;
    }
    string_close(json, 0)
}

/// The index after the value that starts at `i` (no whitespace before it).
fn value_end(json: &[u8], i: usize) -> usize {
    match json.get(i) {
        Some(b'"') => string_end(json, i),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut j = i;
            while let Some(&b) = json.get(j) {
                match b {
                    b'"' => {
                        j = string_end(json, j);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return j + 1;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            json.len()
        }
        Some(_) => {
            let mut j = i;
            while json
                .get(j)
                .is_some_and(|b| !matches!(b, b',' | b'}' | b']') && !b.is_ascii_whitespace())
            {
                j += 1;
            }
            j
        }
        None => i,
    }
}

fn skip_ws(json: &[u8], mut i: usize) -> usize {
    while json.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// The members of the object that starts `object` (text after its closing brace is not
/// read), in order: each key as written between its quotes (escapes not decoded) and the
/// text from its value's start to the end of `object`. A value is skipped only when the
/// next member is asked for, so a reader that stops at a member never scans its value, and
/// one that needs the value's exact text takes [`value`] of it. Empty if `object` does not
/// start with an object.
pub fn members(object: &str) -> Members<'_> {
    let bytes = object.as_bytes();
    let start = skip_ws(bytes, 0);
    let at = if bytes.get(start) == Some(&b'{') {
        start + 1
    } else {
        bytes.len()
    };
    Members {
        text: object,
        at,
        pending: None,
    }
}

/// The iterator of [`members`].
pub struct Members<'a> {
    text: &'a str,
    at: usize,
    /// Where the value of the member last given starts (it is skipped on the next call).
    pending: Option<usize>,
}

impl<'a> Iterator for Members<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        let json = self.text.as_bytes();
        if let Some(value) = self.pending.take() {
            let end = value_end(json, value);
            self.at = if end == value { json.len() } else { end };
        }
        let mut i = skip_ws(json, self.at);
        if json.get(i) == Some(&b',') {
            i = skip_ws(json, i + 1);
        }
        if json.get(i) != Some(&b'"') {
            self.at = json.len();
            return None;
        }
        let key_end = string_end(json, i);
        let colon = skip_ws(json, key_end);
        let value = skip_ws(json, colon + 1);
        if key_end < i + 2 || json.get(colon) != Some(&b':') || value >= json.len() {
            self.at = json.len();
            return None;
        }
        self.pending = Some(value);
        // Every index above is at an ASCII byte or the text's end, so these are char
        // boundaries; `get` keeps it so if the text was not JSON.
        let key = self.text.get(i + 1..key_end - 1)?;
        Some((key, self.text.get(value..)?))
    }
}

/// The exact text of the value that starts `tail` (a member's value as [`members`] gives
/// it).
pub fn value(tail: &str) -> &str {
    tail.get(..value_end(tail.as_bytes(), 0))
        .unwrap_or_default()
}

/// The exact text of the value of the first member `key` (as written, without escapes) of
/// the object that starts `object`.
pub fn member<'a>(object: &'a str, key: &str) -> Option<&'a str> {
    members(object)
        .find(|(k, _)| *k == key)
        .map(|(_, tail)| value(tail))
}

/// The string a value's exact text holds (`None` if it is not a string).
pub fn string(value: &str) -> Option<std::borrow::Cow<'_, str>> {
    let inner = value.strip_prefix('"')?.strip_suffix('"')?;
    if inner.contains('\\') {
        serde_json::from_str::<String>(value).ok().map(Into::into)
    } else {
        Some(inner.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str =
        r#" { "a" : 1 , "b":"x\"y}","c":{"d":[1,{"e":"]"}],"f":true},"g":null,"h":-1.5e3} "#;

    #[test]
    fn members_are_each_key_and_its_value_text() {
        let got: Vec<_> = members(DOC).map(|(k, tail)| (k, value(tail))).collect();
        assert_eq!(
            got,
            [
                ("a", "1"),
                ("b", r#""x\"y}""#),
                ("c", r#"{"d":[1,{"e":"]"}],"f":true}"#),
                ("g", "null"),
                ("h", "-1.5e3"),
            ]
        );
        assert_eq!(member(member(DOC, "c").unwrap(), "f"), Some("true"));
        assert_eq!(member(DOC, "z"), None);
        assert_eq!(members("[1,2]").count(), 0);
        assert_eq!(members("{}").count(), 0);
        // A member's value runs to the end of the text until asked for exactly.
        let (key, tail) = members(r#"{"a":{"b":2} , "c":3}"#).next().unwrap();
        assert_eq!(
            (key, tail, value(tail)),
            ("a", r#"{"b":2} , "c":3}"#, r#"{"b":2}"#)
        );
        assert_eq!(member(tail, "b"), Some("2"));
        assert_eq!(
            member(tail, "c"),
            None,
            "only the object that starts the text is read"
        );
    }

    #[test]
    fn a_string_is_measured_to_its_closing_quote() {
        assert_eq!(string_len(r#""a\"b","x""#), Some(6));
        assert_eq!(string_len(r#""""#), Some(2));
        for bad in ["", "x", "\"", "\"ab", "\"a\\\""] {
            assert_eq!(string_len(bad), None, "{bad}");
        }
    }

    #[test]
    fn strings_are_decoded_only_when_escaped() {
        assert_eq!(string(r#""tool_call""#).as_deref(), Some("tool_call"));
        assert_eq!(string(r#""tool\u005fcall""#).as_deref(), Some("tool_call"));
        assert_eq!(string("12"), None);
    }

    #[test]
    fn the_next_quote_or_backslash_is_found_at_every_place() {
        for len in 0..80 {
            for at in 0..=len {
                let mut text = vec![b'a'; len];
                if at < len {
                    text[at] = if at % 2 == 0 { b'"' } else { b'\\' };
                }
                for from in 0..=len + 1 {
                    let want = if from <= at { at } else { len };
                    assert_eq!(to_quote_or_backslash(&text, from), want.max(from.min(len)));
                }
            }
        }
    }

    #[test]
    fn long_strings_are_skipped_whole() {
        let text = "ab\\\"c".repeat(500);
        let doc = format!(r#"{{"k":"{text}","type":"x"}}"#);
        assert_eq!(member(&doc, "type"), Some(r#""x""#));
    }

    #[test]
    fn text_that_is_not_json_gives_less_and_never_panics() {
        let doc = r#"{"a":{"b":"ü\"","c":[1,2]},"d":"é"}"#;
        for end in 0..=doc.len() {
            let Some(cut) = doc.get(..end) else { continue };
            for (_, tail) in members(cut) {
                let _ = members(tail).count();
                let _ = value(tail);
            }
        }
        for junk in [
            "{",
            "{\"",
            "{\"a\"",
            "{\"a\":",
            "{\"a\"x",
            "{1:2}",
            "\"",
            "{\"a\":\"\\",
        ] {
            let _ = members(junk).count();
        }
    }
}
