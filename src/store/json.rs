//! Documents are JSON text: what the bridge sent is what is stored and what it reads back,
//! byte for byte, without a parse/serialise round trip. [`JsonText`] is that text, and the
//! only ways to make one go through a JSON parser ([`JsonText::from_raw`] for text serde
//! already parsed, [`JsonText::parse`] for anything else), so a backend never stores, and an
//! output never splices in, text that is not JSON.
//!
//! The helpers below write the few JSON pieces the store's outputs add around stored text.

use serde_json::value::RawValue;

/// Valid JSON text, kept as it was written (key order, duplicates, number spellings).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct JsonText(String);

/// Text that is not JSON.
#[derive(Debug, thiserror::Error)]
#[error("not valid JSON text: {0}")]
pub struct NotJson(#[from] serde_json::Error);

impl JsonText {
    /// Text serde_json has already parsed (the [`RawValue`] is the proof), copied as is.
    pub fn from_raw(raw: &RawValue) -> Self {
        JsonText(raw.get().to_string())
    }

    /// Checks `text` with serde_json and keeps it as is (nothing is re-serialised).
    pub fn parse(text: String) -> Result<Self, NotJson> {
        serde_json::from_str::<serde::de::IgnoredAny>(&text)?;
        Ok(JsonText(text))
    }

    /// `null`.
    pub fn null() -> Self {
        JsonText("null".to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl AsRef<str> for JsonText {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for JsonText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A JSON string literal.
pub fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("strings serialise")
}

/// Appends `s` as a JSON string literal, byte for byte what [`json_str`] gives, without an
/// allocation when nothing needs escaping (ids, event types).
pub fn push_json_str(out: &mut String, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        out.push_str(&json_str(s));
    }
}

/// Appends the decimal digits of `n` (what `Display` gives, without the `fmt` machinery,
/// which was a tenth of a page's instructions at three numbers per event).
pub fn push_int(out: &mut String, n: i64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut v = n.unsigned_abs();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if n < 0 {
        out.push('-');
    }
    out.push_str(std::str::from_utf8(&digits[i..]).expect("ASCII digits"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_json_gets_in_and_it_stays_as_written() {
        let doc = r#"{"b":1,"a":1.50,"a":null}"#;
        assert_eq!(JsonText::parse(doc.into()).unwrap().as_str(), doc);
        for bad in ["", "{", "{\"a\":}", "nul", "1 2"] {
            assert!(JsonText::parse(bad.into()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn string_literals_match_serde() {
        for s in ["plain", "q\"uote", "back\\slash", "ctl\u{1}", "ünï"] {
            let mut out = String::new();
            push_json_str(&mut out, s);
            assert_eq!(out, json_str(s));
        }
        for n in [0, 7, -12, i64::MAX, i64::MIN] {
            let mut out = String::new();
            push_int(&mut out, n);
            assert_eq!(out, n.to_string());
        }
    }
}
