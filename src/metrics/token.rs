//! The token of `GET /metrics`, from `[metrics]`: its own, so a Prometheus server that
//! scrapes the daemon holds no token that can read or write agent state.

use crate::config::{ConfigError, MetricsConfig};
use crate::secret::Secret;
use crate::tokens::Tokens;

/// The token `/metrics` requires: `CALLBACKD_METRICS_TOKEN` (applied over `token` by
/// `Config::apply_env`), `token`, or the first line of `token_file`; `None` when none is
/// set. It must differ from every other token (`bridge`: the bridge's and the run API's).
pub fn resolve(config: &MetricsConfig, bridge: &Tokens) -> Result<Option<Secret>, ConfigError> {
    let Some(token) = config.token_source().resolve(&|k| std::env::var(k).ok())? else {
        return Ok(None);
    };
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
        assert!(resolve(&MetricsConfig::default(), &bridge())
            .unwrap()
            .is_none());
        let value = MetricsConfig {
            token: Some(Secret::new("scrape".into())),
            token_file: None,
        };
        assert_eq!(
            resolve(&value, &bridge()).unwrap().unwrap().expose(),
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
            resolve(&from_file, &bridge()).unwrap().unwrap().expose(),
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
            let err = resolve(&c, &bridge()).unwrap_err().to_string();
            assert!(err.contains("metrics.token"), "{bad}: {err}");
        }
        let missing = MetricsConfig {
            token: None,
            token_file: Some(dir.path().join("nope")),
        };
        assert!(resolve(&missing, &bridge())
            .unwrap_err()
            .to_string()
            .contains("nope"));
    }
}
