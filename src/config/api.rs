//! `[api]`: the settings of the run API (HTTP + SSE for the people and programs that use
//! agents).

use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{ConfigError, TokenSource};
use crate::secret::Secret;

/// `[api]`: the run API under `/v1`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ApiConfig {
    /// The API's bearer token (read and write). From `CALLBACKD_API_TOKEN`, this value, the
    /// file below, or generated into the tokens file.
    pub token: Option<Secret>,
    /// A file holding the API token.
    #[schemars(example = &"/run/secrets/callbackd-api-token")]
    pub token_file: Option<PathBuf>,
    /// A second, read-only token: sessions, runs and streams, but no create, send or cancel.
    pub read_token: Option<Secret>,
    /// A file holding the read-only token.
    #[schemars(example = &"/run/secrets/callbackd-api-read-token")]
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
    #[schemars(example = ["https://app.example"])]
    pub cors_origins: Vec<String>,
    /// Open streams at most (their own cap: streams do not count against
    /// `server.max_connections`). Past it a stream request answers 503.
    pub max_streams: usize,
    /// Open streams one namespace may hold at most, so one namespace's readers cannot
    /// take every place under `max_streams` from the others. 0: automatic (all of
    /// `max_streams` when only the default namespace is configured, half of it with more).
    pub max_streams_per_namespace: usize,
    /// How long a stream may wait for a slow reader to take its next events before it is
    /// dropped (the reader then resumes from the store with `after`).
    pub slow_reader_ms: u64,
    /// Bytes of events one stream holds up for a reader that has not taken them yet (a
    /// bigger single event still goes, alone); past it the stream waits for the reader, up
    /// to `slow_reader_ms`. With what hyper buffers below it (about 400 KiB at most), this
    /// bounds the daemon's memory per stream whatever the run's size.
    pub stream_buffer_bytes: usize,
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
            max_streams_per_namespace: 0,
            slow_reader_ms: 30_000,
            stream_buffer_bytes: 256 * 1024,
            max_body_bytes: 1024 * 1024,
            send_settle_ms: 5_000,
            label: "api".into(),
        }
    }
}

impl ApiConfig {
    /// `api.token`, `api.token_file`.
    pub fn token_source(&self) -> TokenSource<'_> {
        TokenSource {
            key: "api.token".into(),
            value: self.token.as_ref(),
            file: self.token_file.as_deref(),
            env: None,
        }
    }

    /// `api.read_token`, `api.read_token_file`.
    pub fn read_token_source(&self) -> TokenSource<'_> {
        TokenSource {
            key: "api.read_token".into(),
            value: self.read_token.as_ref(),
            file: self.read_token_file.as_deref(),
            env: None,
        }
    }

    pub fn keepalive(&self) -> Duration {
        Duration::from_millis(self.keepalive_ms)
    }

    pub fn max_stream(&self) -> Duration {
        Duration::from_millis(self.max_stream_ms)
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
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
        if self.stream_buffer_bytes < 4096 {
            return Err(ConfigError::Invalid(
                "api.stream_buffer_bytes must be at least 4096".into(),
            ));
        }
        if self.max_body_bytes < 1024 {
            return Err(ConfigError::Invalid(
                "api.max_body_bytes must be at least 1024".into(),
            ));
        }
        Ok(())
    }
}
