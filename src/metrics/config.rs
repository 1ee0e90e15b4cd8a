//! `[metrics]`: the optional bearer token of `GET /metrics`.
//!
//! The token is its own: a Prometheus server that scrapes the daemon should not hold a
//! token that can read or write agent state, so the bridge's store and tool tokens and the
//! run API's tokens are refused as the metrics token (and so never accepted on `/metrics`). With no token set,
//! `/metrics` needs none, as with most exporters: the daemon listens on loopback unless
//! `server.allow_remote` is set, and then a warning says that the metrics are open.

use std::path::PathBuf;

use serde::Deserialize;

use crate::config::ConfigError;
use crate::secret::Secret;
use crate::tokens::Tokens;

/// The environment variable of the metrics token (wins over the file's values).
pub const TOKEN_ENV: &str = "CALLBACKD_METRICS_TOKEN";

/// `[metrics]`
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    pub token: Option<Secret>,
    pub token_file: Option<PathBuf>,
}

impl MetricsConfig {
    /// The token `/metrics` requires: `CALLBACKD_METRICS_TOKEN` (applied over `token` by
    /// `Config::apply_env`), `token`, or the first line of `token_file`; `None` when none is
    /// set. It must differ from every other token (`bridge`: the bridge's and the run API's).
    pub fn resolve(&self, bridge: &Tokens) -> Result<Option<Secret>, ConfigError> {
        let token = match (&self.token, &self.token_file) {
            (Some(token), _) => token.clone(),
            (None, Some(path)) => {
                let text =
                    std::fs::read_to_string(path).map_err(|source| ConfigError::TokenFile {
                        path: path.clone(),
                        source,
                    })?;
                Secret::new(text.trim().to_string())
            }
            (None, None) => return Ok(None),
        };
        let t = token.expose();
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ConfigError::Invalid(
                "metrics.token must be visible ASCII without spaces, and not empty".into(),
            ));
        }
        if token == bridge.store
            || token == bridge.tool
            || token == bridge.api
            || bridge.api_read.as_ref() == Some(&token)
        {
            return Err(ConfigError::Invalid(
                "metrics.token must differ from the store, tool and API tokens: a scraper must \
                 not hold a token that reaches agent state"
                    .into(),
            ));
        }
        Ok(Some(token))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bridge() -> Tokens {
        Tokens {
            store: Secret::new("store-tok".into()),
            tool: Secret::new("tool-tok".into()),
            api: Secret::new("api-tok".into()),
            api_read: Some(Secret::new("read-tok".into())),
        }
    }

    #[test]
    fn a_token_from_the_value_or_the_file_and_never_a_bridge_token() {
        assert!(MetricsConfig::default()
            .resolve(&bridge())
            .unwrap()
            .is_none());
        let value = MetricsConfig {
            token: Some(Secret::new("scrape".into())),
            token_file: None,
        };
        assert_eq!(
            value.resolve(&bridge()).unwrap().unwrap().expose(),
            "scrape"
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("metrics.token");
        std::fs::write(&file, "from-file\n").unwrap();
        let from_file = MetricsConfig {
            token: None,
            token_file: Some(file),
        };
        assert_eq!(
            from_file.resolve(&bridge()).unwrap().unwrap().expose(),
            "from-file"
        );
        for bad in [
            "store-tok",
            "tool-tok",
            "api-tok",
            "read-tok",
            "",
            "two words",
        ] {
            let c = MetricsConfig {
                token: Some(Secret::new(bad.into())),
                token_file: None,
            };
            let err = c.resolve(&bridge()).unwrap_err().to_string();
            assert!(err.contains("metrics.token"), "{bad}: {err}");
        }
        let missing = MetricsConfig {
            token: None,
            token_file: Some(dir.path().join("nope")),
        };
        assert!(missing
            .resolve(&bridge())
            .unwrap_err()
            .to_string()
            .contains("nope"));
    }
}
