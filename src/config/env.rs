//! The `CALLBACKD_*` environment variables, applied over the file by [`Config::apply_env`].

use std::path::PathBuf;

use super::{BackendKind, Config, ConfigError};
use crate::secret::Secret;

pub const CONFIG: &str = "CALLBACKD_CONFIG";
pub const LISTEN: &str = "CALLBACKD_LISTEN";
pub const ALLOW_REMOTE: &str = "CALLBACKD_ALLOW_REMOTE";
pub const DB: &str = "CALLBACKD_DB";
pub const STORE_URL: &str = "CALLBACKD_STORE_URL";
pub const STORE_TOKEN: &str = "CALLBACKD_STORE_TOKEN";
pub const TOOL_TOKEN: &str = "CALLBACKD_TOOL_TOKEN";
pub const LOG: &str = "CALLBACKD_LOG";
pub const API_TOKEN: &str = "CALLBACKD_API_TOKEN";
pub const API_READ_TOKEN: &str = "CALLBACKD_API_READ_TOKEN";
/// The metrics token (wins over the file's values).
pub const METRICS_TOKEN: &str = "CALLBACKD_METRICS_TOKEN";

impl Config {
    /// Applies the `CALLBACKD_*` environment variables (`get` is `std::env::var` outside
    /// tests).
    pub fn apply_env(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        if let Some(v) = get(LISTEN) {
            self.server.listen = v;
        }
        if let Some(v) = get(ALLOW_REMOTE) {
            self.server.allow_remote = match v.as_str() {
                "1" | "true" | "yes" => true,
                "0" | "false" | "no" | "" => false,
                _ => {
                    return Err(ConfigError::Env {
                        var: ALLOW_REMOTE,
                        value: v,
                        reason: "expected true or false".into(),
                    })
                }
            };
        }
        if let Some(v) = get(DB) {
            self.store.path = PathBuf::from(v);
        }
        if let Some(v) = get(STORE_URL).filter(|v| !v.is_empty()) {
            self.store.backend = BackendKind::Postgres;
            self.store.url = Some(Secret::new(v));
        }
        if let Some(v) = get(STORE_TOKEN) {
            self.auth.store_token = Some(Secret::new(v));
        }
        if let Some(v) = get(TOOL_TOKEN) {
            self.auth.tool_token = Some(Secret::new(v));
        }
        if let Some(v) = get(LOG) {
            self.log.level = v;
        }
        if let Some(v) = get(API_TOKEN) {
            self.api.token = Some(Secret::new(v));
        }
        if let Some(v) = get(API_READ_TOKEN) {
            self.api.read_token = Some(Secret::new(v));
        }
        if let Some(v) = get(METRICS_TOKEN) {
            self.metrics.token = Some(Secret::new(v));
        }
        Ok(())
    }
}
