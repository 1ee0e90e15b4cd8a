//! `[tools]`: the defaults of every tool, per-tool limits, and the tools that run a program.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

use super::ConfigError;

/// `[tools]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolsConfig {
    /// Default time limit of one tool call.
    pub timeout_ms: u64,
    /// Default number of concurrent calls of one tool.
    pub max_concurrency: usize,
    /// Tools switched off by name (built-in, command or plugin).
    pub disabled: Vec<String>,
    /// `[tools.limits.NAME]`: limits of one tool, over whatever the tool sets itself.
    pub limits: BTreeMap<String, ToolLimitsConfig>,
    /// `[[tools.command]]`: tools that run a program.
    pub command: Vec<CommandToolConfig>,
    /// How often a held call re-reads its approval when nothing woke it: the fallback for
    /// a decision made through another daemon on SQLite, or a missed PostgreSQL
    /// notification (a decision through this daemon, or another on PostgreSQL, wakes it at
    /// once). Default 5 s.
    pub approval_poll_ms: u64,
}

/// One `[tools.limits.NAME]` table: for built-in and plugin tools, whose limits are set in
/// code, this is the one place to change them without a rebuild.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolLimitsConfig {
    pub timeout_ms: Option<u64>,
    pub max_concurrency: Option<usize>,
    /// When a call waits for a person's decision (`tools::approval`).
    pub approval: Option<ApprovalSetting>,
    /// How long a held call waits before it is denied; default 10 minutes.
    pub approval_timeout_ms: Option<u64>,
    /// The console asks for a second, confirming step before it approves a call of this
    /// tool (and `callbackd approve` for `--yes`).
    pub confirm: Option<bool>,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        ToolsConfig {
            timeout_ms: 60_000,
            max_concurrency: 16,
            disabled: Vec::new(),
            limits: Default::default(),
            command: Vec::new(),
            approval_poll_ms: 5_000,
        }
    }
}

impl ToolsConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.max_concurrency == 0 {
            return Err(ConfigError::Invalid(
                "tools.max_concurrency must be at least 1".into(),
            ));
        }
        if self.timeout_ms == 0 {
            return Err(ConfigError::Invalid(
                "tools.timeout_ms must be at least 1".into(),
            ));
        }
        if self.approval_poll_ms == 0 {
            return Err(ConfigError::Invalid(
                "tools.approval_poll_ms must be at least 1".into(),
            ));
        }
        for (name, limits) in &self.limits {
            if limits.timeout_ms == Some(0) || limits.max_concurrency == Some(0) {
                return Err(ConfigError::Invalid(format!(
                    "tools.limits.{name}: timeout_ms and max_concurrency must be at least 1"
                )));
            }
        }
        Ok(())
    }
}

/// One `[[tools.command]]` block.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandToolConfig {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments (a TOML table, or a JSON string).
    #[serde(default)]
    pub input_schema: Option<toml::Value>,
    #[serde(default)]
    pub output_schema: Option<toml::Value>,
    /// Program and arguments; no shell is involved.
    pub argv: Vec<String>,
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub max_concurrency: Option<usize>,
    /// Largest stdout accepted; more fails the call and stops the program.
    #[serde(default)]
    pub max_output_bytes: Option<usize>,
    /// As in `[tools.limits.NAME]`: when a call waits for a person's decision.
    #[serde(default)]
    pub approval: Option<ApprovalSetting>,
    #[serde(default)]
    pub approval_timeout_ms: Option<u64>,
    /// As in `[tools.limits.NAME]`: approving asks for a confirming step.
    #[serde(default)]
    pub confirm: Option<bool>,
}

/// The `approval` key as written in the config (compiled against the tool's schema by
/// `tools::approval`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum ApprovalSetting {
    /// `"never"` or `"always"`.
    Mode(String),
    /// A rule on one argument.
    Rule {
        pointer: String,
        #[serde(default)]
        values: Option<Vec<Value>>,
        #[serde(default)]
        pattern: Option<String>,
    },
}
