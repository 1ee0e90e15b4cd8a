//! Configuration: defaults < TOML file < environment < command-line flags, validated right
//! after loading so a bad setting fails at startup, not on the first call.
//!
//! A leaf: one file per section, plain data with its defaults and checks; it imports
//! nothing of the program but [`crate::secret`] and [`crate::data_dir`]. What a section
//! turns into (a store backend, a bridge client, a tool registry) is decided by the code
//! that uses it. Every token of every section resolves through one [`TokenSource`].
//!
//! Every key is shown, with its default and what it does, in
//! `config/callbackd.example.toml` (embedded as [`EXAMPLE`] and parsed in a test).

mod api;
mod auth;
mod bridge;
pub mod env;
mod error;
mod field_order;
mod log;
mod metrics;
mod namespaces;
mod rebase;
mod reference;
mod retention;
mod server;
mod store;
mod telemetry;
mod token;
mod tools;
mod webhooks;

use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;

pub use api::ApiConfig;
pub use auth::AuthConfig;
pub use bridge::BridgeConfig;
pub use error::ConfigError;
pub use log::{LogConfig, LogFormat};
pub use metrics::MetricsConfig;
pub use namespaces::{NamespaceConfig, OverRate, QuotaConfig, Quotas, TokenRole};
pub use reference::reference;
pub use retention::{parse_duration, RetentionConfig};
pub use server::{ServerConfig, DEFAULT_LISTEN};
pub use store::{is_postgres_url, BackendKind, StoreConfig, SyncMode};
pub use telemetry::{TelemetryConfig, TraceExport};
pub use token::{check_token, TokenSource};
pub use tools::{ApprovalSetting, CommandToolConfig, ToolLimitsConfig, ToolsConfig};
pub use webhooks::{check_secret, WebhookConfig, DEFAULT_BACKOFF_MS, WEBHOOK_EVENTS};

/// `config/callbackd.example.toml`: [`reference()`] as committed (a test compares them).
pub const EXAMPLE: &str = include_str!("../../config/callbackd.example.toml");

/// callbackd configuration (`callbackd print-config`). Every key is optional; the values
/// shown are the defaults, keys without one are commented out. Precedence: defaults < this
/// file < CALLBACKD_* environment variables < command-line flags. Relative paths are
/// relative to this file's directory.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    pub auth: AuthConfig,
    pub store: StoreConfig,
    pub tools: ToolsConfig,
    pub log: LogConfig,
    pub api: ApiConfig,
    pub bridge: BridgeConfig,
    pub retention: RetentionConfig,
    pub metrics: MetricsConfig,
    /// `[telemetry]`: OpenTelemetry traces of agent runs (docs/telemetry.md).
    pub telemetry: TelemetryConfig,
    /// `[[namespaces]]`: more bridges on this daemon (docs/namespaces.md).
    pub namespaces: Vec<NamespaceConfig>,
    /// `[[webhooks]]`: signed POSTs when an approval or a question waits for a person, is
    /// decided, or a run ends (docs/webhooks.md).
    pub webhooks: Vec<WebhookConfig>,
}

impl Config {
    /// Reads a TOML file. Relative paths in it are taken relative to the file's directory.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut config: Config = toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
        // "" for a bare file name: the file is in the working directory.
        config.rebase(path.parent().unwrap_or(Path::new("")));
        Ok(config)
    }

    /// The model of sessions created without one.
    pub fn bridge_model(&self) -> String {
        self.bridge.model()
    }

    /// The API key passed with new sessions: `[bridge] api_key`, else `CURSOR_API_KEY` of
    /// the daemon's environment (the bridge may hold its own as well).
    pub fn bridge_api_key(&self) -> String {
        self.bridge.api_key()
    }

    /// Loads the configuration the way the daemon does: the file (if any), then the
    /// environment. Command-line overrides are applied by the caller, then [`validate`].
    ///
    /// [`validate`]: Config::validate
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let mut config = match file {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        config.apply_env(|k| std::env::var(k).ok())?;
        Ok(config)
    }

    /// Checks the settings that can be checked without touching the network or the disk.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.server.validate()?;
        self.store.validate()?;
        self.api.validate()?;
        self.retention.validate()?;
        self.telemetry.validate()?;
        for (key, token) in [
            ("auth.store_token", &self.auth.store_token),
            ("auth.tool_token", &self.auth.tool_token),
            ("api.token", &self.api.token),
            ("api.read_token", &self.api.read_token),
        ] {
            if let Some(t) = token {
                check_token(key, t)?;
            }
        }
        for (i, hook) in self.webhooks.iter().enumerate() {
            hook.validate(i)?;
        }
        self.tools.validate()
    }

    /// The webhooks' signing keys, in entry order, read from their values, files or
    /// environment variables and checked (at start and by `check-config`).
    pub fn webhook_keys(&self) -> Result<Vec<Vec<u8>>, ConfigError> {
        let getenv = |k: &str| std::env::var(k).ok();
        self.webhooks
            .iter()
            .enumerate()
            .map(|(i, hook)| hook.signing_key(i, &getenv))
            .collect()
    }
}

#[cfg(test)]
mod tests;
