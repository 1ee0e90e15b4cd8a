//! The answer to a JSON request with a field its message does not have.
//!
//! proto3 JSON parsers refuse unknown fields by default, and silently dropping one hides the
//! mistake behind a misleading error: `{"subStore": "agents", ...}` would otherwise be answered
//! "substore is required". The answer names the field, and the field it was probably meant to
//! be.

use crate::connect::ConnectError;

/// `unknown field "subStore" in sdk.v1.CallStoreRequest; did you mean "substore"?`, or the
/// list of the message's fields when none is close.
pub fn unknown_field(message: &str, field: &str, known: &[&str]) -> ConnectError {
    let shown = shorten(field);
    ConnectError::invalid_argument(match suggestion(field, known) {
        Some(s) => format!("unknown field {shown:?} in {message}; did you mean {s:?}?"),
        None => format!(
            "unknown field {shown:?} in {message}: its fields are {}",
            known.join(", ")
        ),
    })
}

/// A field name in an error message, cut to a sane length.
fn shorten(field: &str) -> &str {
    const MAX: usize = 64;
    match field.char_indices().nth(MAX) {
        Some((i, _)) => &field[..i],
        None => field,
    }
}

/// The known field `field` is most likely a misspelling of: the same letters in another case
/// or with `_` (a snake_case spelling), or at most two edits away.
fn suggestion<'a>(field: &str, known: &[&'a str]) -> Option<&'a str> {
    let fold = |s: &str| -> String {
        s.chars()
            .filter(|c| *c != '_')
            .flat_map(char::to_lowercase)
            .collect()
    };
    let folded = fold(field);
    if let Some(k) = known.iter().find(|k| fold(k) == folded) {
        return Some(k);
    }
    if folded.chars().count() > 64 {
        return None;
    }
    known
        .iter()
        .map(|k| (edit_distance(&folded, &fold(k)), *k))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance (short strings only: callers bound the length).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut row = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != *cb);
            row[j + 1] = substitute.min(prev[j + 1] + 1).min(row[j] + 1);
        }
        prev = row;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    const STORE: &[&str] = &["substore", "method", "input"];

    #[test]
    fn a_near_miss_is_named_with_the_field_it_was_meant_to_be() {
        let e = unknown_field("sdk.v1.CallStoreRequest", "subStore", STORE);
        assert_eq!(
            e.message,
            r#"unknown field "subStore" in sdk.v1.CallStoreRequest; did you mean "substore"?"#
        );
        assert_eq!(suggestion("methdo", STORE), Some("method"));
        assert_eq!(suggestion("inputs", STORE), Some("input"));
        assert_eq!(
            suggestion("TOOL_NAME", &["toolName", "agentId"]),
            Some("toolName")
        );
    }

    #[test]
    fn a_field_far_from_every_known_one_lists_them() {
        let e = unknown_field("sdk.v1.CallStoreRequest", "payload", STORE);
        assert_eq!(
            e.message,
            r#"unknown field "payload" in sdk.v1.CallStoreRequest: its fields are substore, method, input"#
        );
        let long = "x".repeat(10_000);
        let e = unknown_field("M", &long, STORE);
        assert!(e.message.len() < 200, "{}", e.message);
    }
}
