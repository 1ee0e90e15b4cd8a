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

use schemars::JsonSchema;
use serde::Deserialize;

mod otlp;
#[cfg(test)]
mod tests;

use self::otlp::{check_endpoint, check_header, check_header_name, parse_env_headers, traces_url};
use super::ConfigError;
use crate::secret::Secret;

/// The collector's default OTLP/HTTP base URL (the OpenTelemetry default).
pub const DEFAULT_OTLP_ENDPOINT: &str = "http://localhost:4318";

/// `[telemetry]`: OpenTelemetry traces of agent runs over OTLP (docs/telemetry.md). Off by
/// default.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// Export traces of agent runs. Off by default; setting `otlp_endpoint` turns it on too.
    pub enabled: bool,
    /// The collector's OTLP/HTTP URL: a base (`http://127.0.0.1:6006`, `/v1/traces` is
    /// appended) or the whole traces URL (ending in `/v1/traces`). Unset: the environment's
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT`, else
    /// `http://localhost:4318`. `http` only (a collector on loopback or behind a sidecar).
    #[schemars(example = &"http://127.0.0.1:6006")]
    pub otlp_endpoint: Option<String>,
    /// Headers sent with every export, name -> value (`{ authorization = "Bearer ..." }`,
    /// a vendor's API key). They win over `OTEL_EXPORTER_OTLP_HEADERS` for the same name.
    #[schemars(example = serde_json::json!({ "authorization": "Bearer ..." }))]
    pub headers: BTreeMap<String, Secret>,
    /// Headers whose values are the (trimmed) content of a file, name -> path: a key kept
    /// with the other secrets, as the tokens' `*_file` keys.
    pub headers_file: BTreeMap<String, PathBuf>,
    /// Headers whose values are in an environment variable, name -> variable name.
    pub headers_env: BTreeMap<String, String>,
    /// The `service.name` resource attribute. Unset: `OTEL_SERVICE_NAME`, else `callbackd`.
    #[schemars(example = &"callbackd-prod")]
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
