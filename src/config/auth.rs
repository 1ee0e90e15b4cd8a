//! `[auth]`: the bearer tokens the bridge presents.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;

use super::TokenSource;
use crate::secret::Secret;

/// `[auth]`: the bearer tokens the bridge presents. Each comes from the first of: its
/// environment variable, the value here, the file named here; otherwise it is generated
/// once and kept (mode 0600) next to the database.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// The store callbacks' token (`CALLBACKD_STORE_TOKEN` wins over it).
    pub store_token: Option<Secret>,
    /// A file holding the store token.
    #[schemars(example = &"/run/secrets/callbackd-store-token")]
    pub store_token_file: Option<PathBuf>,
    /// The tool callbacks' token (`CALLBACKD_TOOL_TOKEN` wins over it); differs from the
    /// store token.
    pub tool_token: Option<Secret>,
    /// A file holding the tool token.
    #[schemars(example = &"/run/secrets/callbackd-tool-token")]
    pub tool_token_file: Option<PathBuf>,
}

impl AuthConfig {
    /// `auth.store_token`, `auth.store_token_file`.
    pub fn store_token_source(&self) -> TokenSource<'_> {
        TokenSource {
            key: "auth.store_token".into(),
            value: self.store_token.as_ref(),
            file: self.store_token_file.as_deref(),
            env: None,
        }
    }

    /// `auth.tool_token`, `auth.tool_token_file`.
    pub fn tool_token_source(&self) -> TokenSource<'_> {
        TokenSource {
            key: "auth.tool_token".into(),
            value: self.tool_token.as_ref(),
            file: self.tool_token_file.as_deref(),
            env: None,
        }
    }
}
