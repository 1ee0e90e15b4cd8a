//! Percent-decoding (RFC 3986 §2.1): each `%XX` becomes its byte and the result must be
//! UTF-8. Written once for the three places callbackd reads text another program encoded:
//! `$ref` JSON pointers in tool schemas, the values of the `OTEL_EXPORTER_OTLP_*HEADERS`
//! variables, and `/v1` query strings, where `+` also stands for a space
//! ([`decode_query`]). `None` for a cut or non-hex escape, or bytes that are not UTF-8; each
//! caller says what was malformed in its own terms.

/// `s` with its `%XX` escapes decoded.
pub fn decode(s: &str) -> Option<String> {
    decode_with(s, false)
}

/// A query string's key or value (`application/x-www-form-urlencoded`): `%XX` decoded and
/// `+` read as a space.
pub fn decode_query(s: &str) -> Option<String> {
    decode_with(s, true)
}

fn decode_with(s: &str, plus_is_space: bool) -> Option<String> {
    if !(s.contains('%') || (plus_is_space && s.contains('+'))) {
        return Some(s.to_string());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_decode_and_malformed_ones_are_none() {
        assert_eq!(decode("a%2Fb%20c+d").as_deref(), Some("a/b c+d"));
        assert_eq!(decode_query("a%2Fb%20c+d").as_deref(), Some("a/b c d"));
        assert_eq!(decode("caf%C3%A9").as_deref(), Some("café"));
        assert_eq!(decode("plain").as_deref(), Some("plain"));
        for bad in ["%", "%4", "%zz", "%C3"] {
            assert_eq!(decode(bad), None, "{bad:?}");
            assert_eq!(decode_query(bad), None, "{bad:?}");
        }
    }
}
