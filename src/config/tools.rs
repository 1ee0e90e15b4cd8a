//! `[tools]`: the defaults of every tool, per-tool limits, and the tools that run a program.

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::ConfigError;

/// `[tools]`: the defaults every tool call runs under, the tools switched off, and
/// per-tool limits and command tools below.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
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
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolLimitsConfig {
    /// Time limit of one call of this tool.
    #[schemars(example = 5000)]
    pub timeout_ms: Option<u64>,
    /// Concurrent calls of this tool at most.
    #[schemars(example = 4)]
    pub max_concurrency: Option<usize>,
    /// Hold the tool's calls for a person's approval (docs/approvals.md): "never" (the
    /// default), "always", or a rule on one argument the tool's input schema declares:
    /// { pointer = "/env", values = ["prod"] } or { pointer = "/path", pattern = "^/etc/" }.
    #[schemars(example = &"always")]
    pub approval: Option<ApprovalSetting>,
    /// How long a held call waits for a decision before it is denied; default 10 minutes.
    #[schemars(example = 600000)]
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
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandToolConfig {
    /// The tool's name, as the agent sees it.
    #[schemars(example = &"word_count")]
    pub name: String,
    /// What the tool does, as the agent sees it.
    #[serde(default)]
    #[schemars(example = &"Counts the words of a text")]
    pub description: String,
    /// JSON Schema of the arguments (a TOML table, or a JSON string).
    #[serde(default)]
    #[schemars(example = serde_json::json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}))]
    #[schemars(with = "Option<Value>")]
    pub input_schema: Option<toml::Value>,
    /// JSON Schema of the result, if the tool declares one.
    #[serde(default)]
    #[schemars(with = "Option<Value>", example = serde_json::json!({"type": "integer"}))]
    pub output_schema: Option<toml::Value>,
    /// Program and arguments; no shell is involved. A program given as a relative path
    /// ("./tools/wc.sh") is relative to the config file; a bare name ("python3") is looked
    /// up in PATH.
    #[schemars(example = ["python3", "-c", "import json, sys; print(len(json.load(sys.stdin)['text'].split()))"])]
    pub argv: Vec<String>,
    /// The program's working directory, relative to the config file; default: the daemon's.
    #[serde(default)]
    #[schemars(example = &".")]
    pub cwd: Option<PathBuf>,
    /// Variables added to the program's environment (the daemon's, minus CALLBACKD_*).
    #[serde(default)]
    #[schemars(example = serde_json::json!({"LC_ALL": "C"}))]
    pub env: BTreeMap<String, String>,
    /// Time limit of one call; default `tools.timeout_ms`.
    #[serde(default)]
    #[schemars(example = 5000)]
    pub timeout_ms: Option<u64>,
    /// Concurrent calls at most; default `tools.max_concurrency`.
    #[serde(default)]
    #[schemars(example = 4)]
    pub max_concurrency: Option<usize>,
    /// Largest stdout accepted; more fails the call and stops the program.
    #[serde(default)]
    #[schemars(example = 4194304)]
    pub max_output_bytes: Option<usize>,
    /// As in `[tools.limits.NAME]`: when a call waits for a person's decision.
    #[serde(default)]
    #[schemars(example = &"never")]
    pub approval: Option<ApprovalSetting>,
    /// As in `[tools.limits.NAME]`.
    #[serde(default)]
    #[schemars(example = 600000)]
    pub approval_timeout_ms: Option<u64>,
    /// As in `[tools.limits.NAME]`: approving asks for a confirming step.
    #[serde(default)]
    pub confirm: Option<bool>,
}

/// The `approval` key as written in the config (compiled against the tool's schema by
/// `tools::approval`).
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
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
