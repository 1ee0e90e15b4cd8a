//! `[api]`, `[bridge]` and `[retention]`: the settings of the run API (HTTP + SSE for the
//! people and programs that use agents), of the bridge it drives, and of event retention.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::config::ConfigError;
use crate::secret::Secret;

/// `[api]`: the run API under `/v1`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiConfig {
    /// The API's bearer token (read and write). From `CALLBACKD_API_TOKEN`, this value, the
    /// file below, or generated into the tokens file.
    pub token: Option<Secret>,
    pub token_file: Option<PathBuf>,
    /// A second, read-only token: sessions, runs and streams, but no create, send or cancel.
    pub read_token: Option<Secret>,
    pub read_token_file: Option<PathBuf>,
    /// An SSE comment after this long without an event, so proxies and clients see the
    /// connection is alive.
    pub keepalive_ms: u64,
    /// A stream lasts at most this long, then ends with a `reconnect` event.
    pub max_stream_ms: u64,
    /// How long a reader waits before it reconnects after a dropped connection: every
    /// stream starts with an SSE `retry:` field of this value (what a browser's
    /// `EventSource` obeys), and a `reconnect` event asks for it too.
    pub retry_ms: u64,
    /// How long a stream token (`POST /v1/runs/{run_id}/stream-token`) is valid.
    pub stream_token_ttl_ms: u64,
    /// Origins (`https://app.example`, scheme and host and optional port) whose pages may
    /// call `/v1` from a browser (CORS). Default: none.
    pub cors_origins: Vec<String>,
    /// Open streams at most (their own cap: streams do not count against
    /// `server.max_connections`). Past it a stream request answers 503.
    pub max_streams: usize,
    /// How long a stream may wait for a slow reader to take its next events before it is
    /// dropped (the reader then resumes from the store with `after`).
    pub slow_reader_ms: u64,
    /// Largest JSON body of an API request.
    pub max_body_bytes: usize,
    /// How long `POST .../messages` retries a `Send` that the bridge refuses because the
    /// previous turn is still settling ("already has active run").
    pub send_settle_ms: u64,
    /// Who decisions made with the API token are recorded as: `<namespace>/<label>`.
    pub label: String,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            token: None,
            token_file: None,
            read_token: None,
            read_token_file: None,
            keepalive_ms: 15_000,
            max_stream_ms: 15 * 60 * 1000,
            retry_ms: 1000,
            stream_token_ttl_ms: 5 * 60 * 1000,
            cors_origins: Vec::new(),
            max_streams: 1024,
            slow_reader_ms: 30_000,
            max_body_bytes: 1024 * 1024,
            send_settle_ms: 5_000,
            label: "api".into(),
        }
    }
}

impl ApiConfig {
    pub fn keepalive(&self) -> Duration {
        Duration::from_millis(self.keepalive_ms)
    }

    pub fn max_stream(&self) -> Duration {
        Duration::from_millis(self.max_stream_ms)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        for (key, v) in [
            ("api.keepalive_ms", self.keepalive_ms),
            ("api.max_stream_ms", self.max_stream_ms),
            ("api.slow_reader_ms", self.slow_reader_ms),
            ("api.stream_token_ttl_ms", self.stream_token_ttl_ms),
        ] {
            if v == 0 {
                return Err(ConfigError::Invalid(format!("{key} must be at least 1")));
            }
        }
        if self.max_streams == 0 {
            return Err(ConfigError::Invalid(
                "api.max_streams must be at least 1".into(),
            ));
        }
        for origin in &self.cors_origins {
            let Some(rest) = origin
                .strip_prefix("https://")
                .or_else(|| origin.strip_prefix("http://"))
            else {
                return Err(ConfigError::Invalid(format!(
                    "api.cors_origins: {origin:?} is not an origin: it starts with https:// or http://"
                )));
            };
            if rest.is_empty() || rest.contains(['/', '?', '#', '*', ' ']) {
                return Err(ConfigError::Invalid(format!(
                    "api.cors_origins: {origin:?} is not an origin: scheme, host and optional \
                     port only (no path, no trailing slash, no wildcard)"
                )));
            }
        }
        if self.max_body_bytes < 1024 {
            return Err(ConfigError::Invalid(
                "api.max_body_bytes must be at least 1024".into(),
            ));
        }
        Ok(())
    }
}

/// `[bridge]`: a bridge started elsewhere that `callbackd serve` drives for the run API's
/// writes (`POST /v1/sessions`, messages, cancel). `callbackd run` attaches to the bridge
/// it supervises instead and ignores this section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BridgeConfig {
    /// The bridge's Connect URL (its ready line's `url`), e.g. `http://127.0.0.1:7431`.
    pub url: Option<String>,
    /// The bridge's bearer token, or the file holding it (its ready line's `authTokenFile`).
    pub token: Option<Secret>,
    pub token_file: Option<PathBuf>,
    /// The model of new sessions when `POST /v1/sessions` names none.
    pub default_model: String,
    /// The workspace of new sessions when `POST /v1/sessions` names none; default: the
    /// bridge's own `--workspace` (learnt from its ready line under `callbackd run`).
    pub default_cwd: Option<String>,
    /// The API key passed to the bridge with each agent (the bridge may also have its own).
    pub api_key: Option<Secret>,
}

impl BridgeConfig {
    /// The model of sessions created without one.
    pub fn model(&self) -> String {
        if self.default_model.is_empty() {
            "composer-2".into()
        } else {
            self.default_model.clone()
        }
    }

    /// The API key passed with new sessions: `api_key`, else `CURSOR_API_KEY` of the
    /// daemon's environment (the bridge may hold its own as well).
    pub fn api_key(&self) -> String {
        match &self.api_key {
            Some(k) => k.expose().to_string(),
            None => std::env::var("CURSOR_API_KEY").unwrap_or_default(),
        }
    }
}

/// `[retention]`: how long the events of terminal runs are kept.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionConfig {
    /// Age after a run ended past which its events are removed (`"30d"`, `"12h"`, `"90m"`);
    /// unset: forever.
    pub events_max_age: Option<String>,
    /// How often the daemon prunes on its own when `events_max_age` is set.
    pub interval: String,
    /// Runs whose events are removed per transaction, so appends never wait long.
    pub batch_runs: usize,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            events_max_age: None,
            interval: "1h".into(),
            batch_runs: 50,
        }
    }
}

impl RetentionConfig {
    pub fn max_age(&self) -> Result<Option<Duration>, ConfigError> {
        self.events_max_age
            .as_deref()
            .map(|s| parse_duration(s).map_err(|e| invalid("retention.events_max_age", s, &e)))
            .transpose()
    }

    pub fn interval(&self) -> Result<Duration, ConfigError> {
        parse_duration(&self.interval)
            .map_err(|e| invalid("retention.interval", &self.interval, &e))
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        self.max_age()?;
        if self.interval()?.is_zero() {
            return Err(ConfigError::Invalid(
                "retention.interval must be longer than 0".into(),
            ));
        }
        if self.batch_runs == 0 {
            return Err(ConfigError::Invalid(
                "retention.batch_runs must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

fn invalid(key: &str, value: &str, why: &str) -> ConfigError {
    ConfigError::Invalid(format!("{key} = {value:?}: {why}"))
}

/// Parses `"30d"`, `"12h"`, `"90m"`, `"45s"`, `"500ms"` (one number, one unit).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| "a duration needs a unit: ms, s, m, h or d (e.g. \"30d\")".to_string())?;
    let (number, unit) = s.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| "a duration starts with a whole number (e.g. \"30d\")".to_string())?;
    let ms = match unit {
        "ms" => Some(n),
        "s" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        "d" => n.checked_mul(86_400_000),
        other => return Err(format!("unknown unit {other:?}: use ms, s, m, h or d")),
    };
    ms.map(Duration::from_millis)
        .ok_or_else(|| "the duration is too long".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_their_unit_only() {
        assert_eq!(
            parse_duration("30d").unwrap(),
            Duration::from_secs(30 * 86400)
        );
        assert_eq!(parse_duration("90m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert!(parse_duration("30").unwrap_err().contains("unit"));
        assert!(parse_duration("d").unwrap_err().contains("whole number"));
        assert!(parse_duration("3w").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("99999999999999999d").is_err());
    }
}
