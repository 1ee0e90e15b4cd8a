//! `[telemetry]`: OpenTelemetry traces of agent runs, exported over OTLP (HTTP/protobuf) to
//! a collector (Arize Phoenix, Jaeger, Grafana Tempo, Honeycomb, an OpenTelemetry
//! Collector). Off by default; what is exported is described in docs/telemetry.md.
//!
//! The standard OpenTelemetry variables are honoured where the file leaves a key unset:
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the whole URL) and `OTEL_EXPORTER_OTLP_ENDPOINT`
//! (a base URL, `/v1/traces` appended) for the endpoint, `OTEL_EXPORTER_OTLP_HEADERS` and
//! `OTEL_EXPORTER_OTLP_TRACES_HEADERS` (`key=value,key2=value2`, values percent-encoded) for
//! headers, `OTEL_SERVICE_NAME` for the service name; `OTEL_SDK_DISABLED=true` turns
//! export off. The variables alone never turn it on: `enabled = true` (or an
//! `otlp_endpoint`) does, so a daemon started in an environment set up for other programs
//! sends nothing anywhere until asked to.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::ConfigError;
use crate::secret::Secret;

/// The collector's default OTLP/HTTP base URL (the OpenTelemetry default).
pub const DEFAULT_OTLP_ENDPOINT: &str = "http://localhost:4318";

/// `[telemetry]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// Export traces of agent runs. Off by default; setting `otlp_endpoint` turns it on too.
    pub enabled: bool,
    /// The collector's OTLP/HTTP URL: a base (`http://127.0.0.1:6006`, `/v1/traces` is
    /// appended) or the whole traces URL (ending in `/v1/traces`). Unset: the environment's
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT`, else
    /// `http://localhost:4318`. `http` only (a collector on loopback or behind a sidecar).
    pub otlp_endpoint: Option<String>,
    /// Headers sent with every export, name -> value (`{ authorization = "Bearer ..." }`,
    /// a vendor's API key). They win over `OTEL_EXPORTER_OTLP_HEADERS` for the same name.
    pub headers: BTreeMap<String, Secret>,
    /// Headers whose values are the (trimmed) content of a file, name -> path: a key kept
    /// with the other secrets, as the tokens' `*_file` keys.
    pub headers_file: BTreeMap<String, PathBuf>,
    /// Headers whose values are in an environment variable, name -> variable name.
    pub headers_env: BTreeMap<String, String>,
    /// The `service.name` resource attribute. Unset: `OTEL_SERVICE_NAME`, else `callbackd`.
    pub service_name: Option<String>,
    /// Share of runs traced, 0.0 to 1.0 (1.0: every run). Decided per run from its trace
    /// id, so a run is traced whole or not at all.
    pub sampling_ratio: f64,
    /// Put tool arguments and results, the run's input and its final output in the spans
    /// (`input.value`, `output.value`, `gen_ai.tool.call.arguments` / `.result`). Off by
    /// default: they can hold secrets, and a collector is often shared more widely than the
    /// store.
    pub capture_content: bool,
    /// Spans waiting for export at most; past it new spans are dropped (and counted in
    /// `callbackd_telemetry_spans_dropped_total`), never waited for.
    pub queue_size: usize,
    /// How long one export request may take, milliseconds, before its spans are dropped.
    pub export_timeout_ms: u64,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            enabled: false,
            otlp_endpoint: None,
            headers: BTreeMap::new(),
            headers_file: BTreeMap::new(),
            headers_env: BTreeMap::new(),
            service_name: None,
            sampling_ratio: 1.0,
            capture_content: false,
            queue_size: 2048,
            export_timeout_ms: 10_000,
        }
    }
}

/// What `[telemetry]` and the environment resolve to when export is on.
#[derive(Debug, Clone)]
pub struct TraceExport {
    /// The whole traces URL (`.../v1/traces`).
    pub endpoint: String,
    /// Header name (lower case) -> value.
    pub headers: BTreeMap<String, Secret>,
    pub service_name: String,
    pub sampling_ratio: f64,
    pub capture_content: bool,
    pub queue_size: usize,
    pub export_timeout_ms: u64,
}

impl TelemetryConfig {
    /// Whether traces are exported (before the environment's `OTEL_SDK_DISABLED`).
    pub fn is_on(&self) -> bool {
        self.enabled || self.otlp_endpoint.is_some()
    }

    /// The checks that need neither files nor the environment.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(0.0..=1.0).contains(&self.sampling_ratio) {
            return Err(ConfigError::Invalid(format!(
                "telemetry.sampling_ratio must be between 0.0 and 1.0, not {}",
                self.sampling_ratio
            )));
        }
        if self.queue_size == 0 {
            return Err(ConfigError::Invalid(
                "telemetry.queue_size must be at least 1".into(),
            ));
        }
        if let Some(url) = &self.otlp_endpoint {
            check_endpoint("telemetry.otlp_endpoint", url)?;
        }
        for (name, value) in &self.headers {
            let key = format!("telemetry.headers.{name}");
            check_header(&key, name, value.expose())?;
        }
        for name in self.headers_file.keys().chain(self.headers_env.keys()) {
            check_header_name(&format!("telemetry.headers.{name}"), name)?;
        }
        Ok(())
    }

    /// The export settings, or `None` when export is off. Reads the header files and the
    /// environment (`getenv` is `std::env::var` outside tests); every failure names the key
    /// or variable to fix.
    pub fn resolve(
        &self,
        getenv: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<TraceExport>, ConfigError> {
        if !self.is_on() {
            return Ok(None);
        }
        if getenv("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        self.validate()?;
        let endpoint = match &self.otlp_endpoint {
            Some(url) => traces_url(url),
            None => match getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").filter(|v| !v.is_empty()) {
                Some(url) => {
                    check_endpoint("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &url)?;
                    url
                }
                None => {
                    let base = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
                        .filter(|v| !v.is_empty())
                        .unwrap_or_else(|| DEFAULT_OTLP_ENDPOINT.into());
                    check_endpoint("OTEL_EXPORTER_OTLP_ENDPOINT", &base)?;
                    traces_url(&base)
                }
            },
        };
        let mut headers = BTreeMap::new();
        for var in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        ] {
            if let Some(text) = getenv(var) {
                for (name, value) in parse_env_headers(var, &text)? {
                    headers.insert(name, Secret::new(value));
                }
            }
        }
        for (name, value) in &self.headers {
            headers.insert(name.to_ascii_lowercase(), value.clone());
        }
        for (name, path) in &self.headers_file {
            let key = format!("telemetry.headers_file.{name}");
            let text = std::fs::read_to_string(path).map_err(|e| {
                ConfigError::Invalid(format!("{key}: cannot read {}: {e}", path.display()))
            })?;
            let value = text.trim().to_string();
            check_header(&key, name, &value)?;
            headers.insert(name.to_ascii_lowercase(), Secret::new(value));
        }
        for (name, var) in &self.headers_env {
            let key = format!("telemetry.headers_env.{name}");
            let value = getenv(var).ok_or_else(|| {
                ConfigError::Invalid(format!("{key}: environment variable {var} is not set"))
            })?;
            check_header(&key, name, &value)?;
            headers.insert(name.to_ascii_lowercase(), Secret::new(value));
        }
        let service_name = self
            .service_name
            .clone()
            .or_else(|| getenv("OTEL_SERVICE_NAME").filter(|v| !v.is_empty()))
            .unwrap_or_else(|| "callbackd".into());
        Ok(Some(TraceExport {
            endpoint,
            headers,
            service_name,
            sampling_ratio: self.sampling_ratio,
            capture_content: self.capture_content,
            queue_size: self.queue_size,
            export_timeout_ms: self.export_timeout_ms,
        }))
    }
}

/// `base` with `/v1/traces` appended, unless it already ends with it.
fn traces_url(base: &str) -> String {
    let trimmed = base.trim_end_matches('/');
    if trimmed.ends_with("/v1/traces") {
        trimmed.to_string()
    } else {
        format!("{trimmed}/v1/traces")
    }
}

fn check_endpoint(key: &str, url: &str) -> Result<(), ConfigError> {
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
fn check_header_name(key: &str, name: &str) -> Result<(), ConfigError> {
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
fn check_header(key: &str, name: &str, value: &str) -> Result<(), ConfigError> {
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
fn parse_env_headers(var: &'static str, text: &str) -> Result<Vec<(String, String)>, ConfigError> {
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
        let value = percent_decode(value.trim()).ok_or_else(|| {
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

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn off_by_default_even_with_the_standard_variables_set() {
        let c = TelemetryConfig::default();
        let e = env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")]);
        assert!(c.resolve(&e).unwrap().is_none());
    }

    #[test]
    fn the_endpoint_comes_from_the_file_then_the_standard_variables() {
        let on = TelemetryConfig {
            enabled: true,
            ..Default::default()
        };
        let none = env(&[]);
        assert_eq!(
            on.resolve(&none).unwrap().unwrap().endpoint,
            "http://localhost:4318/v1/traces"
        );
        let base = env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:6006/")]);
        assert_eq!(
            on.resolve(&base).unwrap().unwrap().endpoint,
            "http://127.0.0.1:6006/v1/traces"
        );
        let whole = env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:6006"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9/x"),
        ]);
        assert_eq!(
            on.resolve(&whole).unwrap().unwrap().endpoint,
            "http://127.0.0.1:9/x"
        );
        let file = TelemetryConfig {
            otlp_endpoint: Some("http://127.0.0.1:7/v1/traces".into()),
            ..Default::default()
        };
        assert_eq!(
            file.resolve(&whole).unwrap().unwrap().endpoint,
            "http://127.0.0.1:7/v1/traces"
        );
        let disabled = env(&[("OTEL_SDK_DISABLED", "true")]);
        assert!(file.resolve(&disabled).unwrap().is_none());
    }

    #[test]
    fn headers_from_the_file_a_file_and_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("key");
        std::fs::write(&key, "from-file\n").unwrap();
        let c = TelemetryConfig {
            enabled: true,
            headers: [(
                "Authorization".to_string(),
                Secret::new("Bearer a b".into()),
            )]
            .into(),
            headers_file: [("api_key".to_string(), key)].into(),
            headers_env: [("x-team".to_string(), "TEAM".to_string())].into(),
            ..Default::default()
        };
        let e = env(&[
            ("TEAM", "blue"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "authorization=lost,x-other=a%20b",
            ),
        ]);
        let h = c.resolve(&e).unwrap().unwrap().headers;
        let got: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.expose())).collect();
        assert_eq!(
            got,
            [
                ("api_key", "from-file"),
                ("authorization", "Bearer a b"),
                ("x-other", "a b"),
                ("x-team", "blue")
            ]
        );
    }

    #[test]
    fn a_malformed_header_is_an_error_naming_its_key() {
        let bad_value = TelemetryConfig {
            enabled: true,
            headers: [("api_key".to_string(), Secret::new("a\nb".into()))].into(),
            ..Default::default()
        };
        let e = bad_value.validate().unwrap_err().to_string();
        assert!(e.contains("telemetry.headers.api_key"), "{e}");
        let bad_name = TelemetryConfig {
            enabled: true,
            headers: [("api key".to_string(), Secret::new("x".into()))].into(),
            ..Default::default()
        };
        let e = bad_name.validate().unwrap_err().to_string();
        assert!(e.contains("telemetry.headers.api key"), "{e}");
        let on = TelemetryConfig {
            enabled: true,
            ..Default::default()
        };
        let e = on
            .resolve(&env(&[(
                "OTEL_EXPORTER_OTLP_HEADERS",
                "secret-without-equals",
            )]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("OTEL_EXPORTER_OTLP_HEADERS"), "{e}");
        assert!(!e.contains("secret-without-equals"), "{e}");
        let e = on
            .resolve(&env(&[("OTEL_EXPORTER_OTLP_HEADERS", "k=%zz")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("percent-encoding"), "{e}");
        let missing = TelemetryConfig {
            enabled: true,
            headers_env: [("api_key".to_string(), "NOPE".to_string())].into(),
            ..Default::default()
        };
        let e = missing.resolve(&env(&[])).unwrap_err().to_string();
        assert!(e.contains("telemetry.headers_env.api_key"), "{e}");
    }

    #[test]
    fn bad_ratio_and_endpoint_are_refused() {
        let c = TelemetryConfig {
            sampling_ratio: 1.5,
            ..Default::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("sampling_ratio"));
        let c = TelemetryConfig {
            otlp_endpoint: Some("https://collector.example:4318".into()),
            ..Default::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("telemetry.otlp_endpoint"));
    }
}
