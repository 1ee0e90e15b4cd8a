//! `[[namespaces]]`: the configuration of one namespace (docs/namespaces.md), as written, and
//! its validation. Tokens are resolved into the namespaces' table (`namespaces::Table`);
//! this file only parses.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{BridgeConfig, ConfigError, TokenSource};
use crate::secret::Secret;

/// One `[[namespaces]]` entry.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct NamespaceConfig {
    /// The namespace's name, unique: its bridge's state and API calls are kept apart
    /// under it (letters a-z, digits, `-` and `_`; at most 63). Every namespace needs a
    /// store token and a tool token; the API tokens are optional.
    #[schemars(example = &"team-a")]
    pub name: String,
    /// The store token of this namespace's bridge (each token names its namespace).
    pub store_token: Option<Secret>,
    /// A file holding the store token.
    #[schemars(example = &"/run/secrets/team-a-store-token")]
    pub store_token_file: Option<PathBuf>,
    /// An environment variable holding the store token.
    #[schemars(example = &"TEAM_A_STORE_TOKEN")]
    pub store_token_env: Option<String>,
    /// The tool token of this namespace's bridge.
    pub tool_token: Option<Secret>,
    /// A file holding the tool token.
    #[schemars(example = &"/run/secrets/team-a-tool-token")]
    pub tool_token_file: Option<PathBuf>,
    /// An environment variable holding the tool token.
    #[schemars(example = &"TEAM_A_TOOL_TOKEN")]
    pub tool_token_env: Option<String>,
    /// The run API token (read and write) of this namespace.
    pub api_token: Option<Secret>,
    /// A file holding the API token.
    #[schemars(example = &"/run/secrets/team-a-api-token")]
    pub api_token_file: Option<PathBuf>,
    /// An environment variable holding the API token.
    #[schemars(example = &"TEAM_A_API_TOKEN")]
    pub api_token_env: Option<String>,
    /// The read-only run API token of this namespace.
    pub api_read_token: Option<Secret>,
    /// A file holding the read-only API token.
    #[schemars(example = &"/run/secrets/team-a-api-read-token")]
    pub api_read_token_file: Option<PathBuf>,
    /// An environment variable holding the read-only API token.
    #[schemars(example = &"TEAM_A_API_READ_TOKEN")]
    pub api_read_token_env: Option<String>,
    /// The tools this namespace may call; unset: every enabled tool.
    #[schemars(example = ["echo", "word_count"])]
    pub tools: Option<Vec<String>>,
    /// `[namespaces.quotas]`: what this namespace may store and how fast it may append;
    /// every quota unset: unlimited.
    pub quotas: QuotaConfig,
    /// The namespace's bridge, for its run API's sessions and messages.
    pub bridge: Option<BridgeConfig>,
}

/// `[namespaces.quotas]`, as written: signed, so that a negative value is refused with a
/// message naming the key rather than a type error.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct QuotaConfig {
    /// Agents stored at once, at most.
    #[schemars(example = 1000)]
    pub max_agents: Option<i64>,
    /// Bytes of documents, events, checkpoints and notes, at most.
    #[schemars(example = 1073741824)]
    pub max_stored_bytes: Option<i64>,
    /// Events of one run at most.
    #[schemars(example = 100000)]
    pub max_events_per_run: Option<i64>,
    /// `runEvents.append` calls per second (a token bucket; bursts up to one second's
    /// worth).
    #[schemars(example = 200)]
    pub max_appends_per_second: Option<i64>,
    /// What happens to an append over `max_appends_per_second`.
    pub over_rate: OverRate,
}

/// What happens to an append over `max_appends_per_second`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OverRate {
    /// Wait for the bucket (up to one second), then refuse.
    #[default]
    Delay,
    /// Refuse at once.
    Refuse,
}

/// The quotas of a namespace, validated (`None`: unlimited).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quotas {
    pub max_agents: Option<u64>,
    pub max_stored_bytes: Option<u64>,
    pub max_events_per_run: Option<u64>,
    pub max_appends_per_second: Option<u64>,
    pub over_rate: OverRate,
}

/// The role of a token, as its keys are named (`store_token`, `api_read_token`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenRole {
    Store,
    Tool,
    Api,
    ApiRead,
}

impl TokenRole {
    pub const ALL: [TokenRole; 4] = [
        TokenRole::Store,
        TokenRole::Tool,
        TokenRole::Api,
        TokenRole::ApiRead,
    ];

    /// The config key (`store_token`).
    pub fn key(self) -> &'static str {
        match self {
            TokenRole::Store => "store_token",
            TokenRole::Tool => "tool_token",
            TokenRole::Api => "api_token",
            TokenRole::ApiRead => "api_read_token",
        }
    }
}

impl NamespaceConfig {
    /// `namespaces[NAME]` (or `namespaces[#i]` before the name is known), for messages.
    pub fn label(&self, index: usize) -> String {
        if self.name.is_empty() {
            format!("namespaces[#{index}]")
        } else {
            format!("namespaces[{}]", self.name)
        }
    }

    /// Where `role`'s token comes from: `<role>`, `<role>_file` or `<role>_env` (entry
    /// `index`, for messages).
    pub fn token_source(&self, index: usize, role: TokenRole) -> TokenSource<'_> {
        let (value, file, env) = match role {
            TokenRole::Store => (
                &self.store_token,
                &self.store_token_file,
                &self.store_token_env,
            ),
            TokenRole::Tool => (
                &self.tool_token,
                &self.tool_token_file,
                &self.tool_token_env,
            ),
            TokenRole::Api => (&self.api_token, &self.api_token_file, &self.api_token_env),
            TokenRole::ApiRead => (
                &self.api_read_token,
                &self.api_read_token_file,
                &self.api_read_token_env,
            ),
        };
        TokenSource {
            key: format!("{}.{}", self.label(index), role.key()),
            value: value.as_ref(),
            file: file.as_deref(),
            env: env.as_deref(),
        }
    }

    /// Whether any source of `role`'s token is set.
    pub fn has_token(&self, role: TokenRole) -> bool {
        self.token_source(0, role).is_set()
    }

    /// The token files this entry reads (watched for changes).
    pub fn token_files(&self) -> impl Iterator<Item = &Path> {
        TokenRole::ALL
            .into_iter()
            .filter_map(|r| self.token_source(0, r).file)
    }

    /// `role`'s token: from the value, the file or the environment variable (exactly one may
    /// be set); `None` if none is. `env` is `std::env::var` outside tests.
    pub fn token(
        &self,
        index: usize,
        role: TokenRole,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Secret>, ConfigError> {
        let source = self.token_source(index, role);
        if source.sources_set() > 1 {
            let key = role.key();
            return Err(ConfigError::Invalid(format!(
                "{}: set only one of {key}, {key}_file and {key}_env",
                self.label(index)
            )));
        }
        source.resolve(env)
    }

    /// Relative token file paths are relative to the config file's directory.
    pub fn rebase(&mut self, fix: &dyn Fn(&mut PathBuf)) {
        for p in [
            &mut self.store_token_file,
            &mut self.tool_token_file,
            &mut self.api_token_file,
            &mut self.api_read_token_file,
        ]
        .into_iter()
        .flatten()
        {
            fix(p);
        }
        if let Some(b) = self.bridge.as_mut() {
            if let Some(p) = b.token_file.as_mut() {
                fix(p);
            }
        }
    }

    /// The quotas, checked: each at least 1.
    pub fn quotas(&self, index: usize) -> Result<Quotas, ConfigError> {
        let q = &self.quotas;
        let check = |key: &str, v: Option<i64>| -> Result<Option<u64>, ConfigError> {
            match v {
                None => Ok(None),
                Some(n) if n >= 1 => Ok(Some(n as u64)),
                Some(n) => Err(ConfigError::Invalid(format!(
                    "{}.quotas.{key} is {n}; a quota must be at least 1 (leave it out for no limit)",
                    self.label(index)
                ))),
            }
        };
        Ok(Quotas {
            max_agents: check("max_agents", q.max_agents)?,
            max_stored_bytes: check("max_stored_bytes", q.max_stored_bytes)?,
            max_events_per_run: check("max_events_per_run", q.max_events_per_run)?,
            max_appends_per_second: check("max_appends_per_second", q.max_appends_per_second)?,
            over_rate: q.over_rate,
        })
    }
}
