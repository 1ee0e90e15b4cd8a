//! `[bridge]` (and a namespace's `[namespaces.bridge]`): a bridge started elsewhere that the
//! run API drives. How it is attached is `bridge`'s business.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;

use super::TokenSource;
use crate::secret::Secret;

/// `[bridge]`: a bridge started elsewhere that `callbackd serve` drives for the run API's
/// writes (`POST /v1/sessions`, messages, cancel). `callbackd run` attaches to the bridge
/// it supervises instead and ignores this section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct BridgeConfig {
    /// The bridge's Connect URL (its ready line's `url`); without it the run API's writes
    /// answer 501 under `callbackd serve`.
    #[schemars(example = &"http://127.0.0.1:7431")]
    pub url: Option<String>,
    /// The bridge's bearer token.
    pub token: Option<Secret>,
    /// A file holding the bridge's token (its ready line's `authTokenFile`).
    #[schemars(example = &"/run/cursor-bridge/token")]
    pub token_file: Option<PathBuf>,
    /// The model of new sessions when `POST /v1/sessions` names none.
    pub default_model: String,
    /// The workspace of new sessions when `POST /v1/sessions` names none. Default: the
    /// daemon's working directory (under `callbackd run`, the supervised bridge's own
    /// `--workspace`, learnt from its ready line).
    #[schemars(example = &"/srv/workspace")]
    pub default_cwd: Option<String>,
    /// The API key passed to the bridge with each agent (the bridge may also have its own).
    pub api_key: Option<Secret>,
}

impl BridgeConfig {
    /// `<section>.token`, `<section>.token_file`; `key` is `bridge.token` or
    /// `namespaces[NAME].bridge.token`.
    pub fn token_source(&self, key: &str) -> TokenSource<'_> {
        TokenSource {
            key: key.to_string(),
            value: self.token.as_ref(),
            file: self.token_file.as_deref(),
            env: None,
        }
    }

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
