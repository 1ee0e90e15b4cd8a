//! `[metrics]`: the optional bearer token of `GET /metrics`.
//!
//! The token is its own: a Prometheus server that scrapes the daemon should not hold a
//! token that can read or write agent state (`metrics::token` refuses the others). With no
//! token set, `/metrics` needs none, as with most exporters: the daemon listens on loopback
//! unless `server.allow_remote` is set, and then a warning says that the metrics are open.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;

use super::TokenSource;
use crate::secret::Secret;

/// `[metrics]`: the bearer token `GET /metrics` asks for, its own (not a store, tool or
/// API token); unset: `/metrics` is open (the daemon listens on loopback unless
/// `server.allow_remote`).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// The scraper's token (`CALLBACKD_METRICS_TOKEN` wins over it).
    pub token: Option<Secret>,
    /// A file holding the metrics token.
    #[schemars(example = &"/run/secrets/callbackd-metrics-token")]
    pub token_file: Option<PathBuf>,
}

impl MetricsConfig {
    /// `metrics.token`, `metrics.token_file` (`CALLBACKD_METRICS_TOKEN` is applied over
    /// `token` by `Config::apply_env`).
    pub fn token_source(&self) -> TokenSource<'_> {
        TokenSource {
            key: "metrics.token".into(),
            value: self.token.as_ref(),
            file: self.token_file.as_deref(),
            env: None,
        }
    }
}
