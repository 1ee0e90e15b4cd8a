//! `[log]`: what the daemon logs, and how.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `[log]`: what the daemon writes to stderr, and how.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// A tracing filter: `info`, `debug`, `callbackd=debug,warn`, ...
    pub level: String,
    /// How each line is written.
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: "info".into(),
            format: LogFormat::Text,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One human-readable line per event.
    #[default]
    Text,
    /// One JSON object per line, for a log collector.
    Json,
}
