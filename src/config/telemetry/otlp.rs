//! The OTLP side of `[telemetry]`: the traces URL, header names and values that can be sent,
//! and the `OTEL_EXPORTER_OTLP_*HEADERS` form. Every error names the key or variable.

use crate::config::ConfigError;

/// `base` with `/v1/traces` appended, unless it already ends with it.
pub(super) fn traces_url(base: &str) -> String {
    let trimmed = base.trim_end_matches('/');
    if trimmed.ends_with("/v1/traces") {
        trimmed.to_string()
    } else {
        format!("{trimmed}/v1/traces")
    }
}

pub(super) fn check_endpoint(key: &str, url: &str) -> Result<(), ConfigError> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        ConfigError::Invalid(format!(
            "{key}: {url:?} is not an http:// URL (OTLP over HTTP/protobuf; put TLS in a \
             collector or sidecar next to callbackd)"
        ))
    })?;
    let host = rest.split('/').next().unwrap_or("");
    if host.is_empty() || url.parse::<http::Uri>().is_err() {
        return Err(ConfigError::Invalid(format!(
            "{key}: {url:?} is not a valid URL"
        )));
    }
    Ok(())
}

/// An HTTP header name: one or more token characters (RFC 9110).
pub(super) fn check_header_name(key: &str, name: &str) -> Result<(), ConfigError> {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(token) {
        return Err(ConfigError::Invalid(format!(
            "{key}: {name:?} is not a valid HTTP header name"
        )));
    }
    Ok(())
}

/// A header name and value that can be sent: the value visible ASCII and spaces, no
/// control characters (a newline would split the request).
pub(super) fn check_header(key: &str, name: &str, value: &str) -> Result<(), ConfigError> {
    check_header_name(key, name)?;
    if value.is_empty() {
        return Err(ConfigError::Invalid(format!("{key}: the value is empty")));
    }
    if !value
        .bytes()
        .all(|b| b == b' ' || b == b'\t' || b.is_ascii_graphic())
    {
        return Err(ConfigError::Invalid(format!(
            "{key}: the value must be visible ASCII (no control characters or newlines)"
        )));
    }
    Ok(())
}

/// `key=value,key2=value2` (the W3C baggage form the OpenTelemetry variables use), values
/// percent-decoded.
pub(super) fn parse_env_headers(
    var: &'static str,
    text: &str,
) -> Result<Vec<(String, String)>, ConfigError> {
    let bad = |reason: String| ConfigError::Env {
        var,
        value: "(not shown: it may hold a key)".into(),
        reason,
    };
    let mut out = Vec::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| bad(format!("{:?} is not name=value", first_chars(pair))))?;
        let name = name.trim().to_ascii_lowercase();
        let value = crate::percent::decode(value.trim()).ok_or_else(|| {
            bad(format!(
                "the value of {name:?} is not valid percent-encoding"
            ))
        })?;
        check_header(var, &name, &value).map_err(|e| bad(e.to_string()))?;
        out.push((name, value));
    }
    Ok(out)
}

/// The first few characters of `s` (never a whole value: it may be a key).
fn first_chars(s: &str) -> String {
    let name = s.split('=').next().unwrap_or("");
    name.chars().take(20).collect()
}
