//! `[retention]`: how long the events of terminal runs are kept, and the durations it is
//! written in.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::ConfigError;

/// `[retention]`: how long the events of terminal runs are kept.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionConfig {
    /// Age after a run ended past which its events are removed (`"30d"`, `"12h"`, `"90m"`);
    /// unset: forever.
    #[schemars(example = &"30d")]
    pub events_max_age: Option<String>,
    /// How often the daemon prunes on its own when `events_max_age` is set.
    pub interval: String,
    /// Runs whose events are removed per transaction, so appends never wait long.
    pub batch_runs: usize,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            events_max_age: None,
            interval: "1h".into(),
            batch_runs: 50,
        }
    }
}

impl RetentionConfig {
    pub fn max_age(&self) -> Result<Option<Duration>, ConfigError> {
        self.events_max_age
            .as_deref()
            .map(|s| parse_duration(s).map_err(|e| invalid("retention.events_max_age", s, &e)))
            .transpose()
    }

    pub fn interval(&self) -> Result<Duration, ConfigError> {
        parse_duration(&self.interval)
            .map_err(|e| invalid("retention.interval", &self.interval, &e))
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        self.max_age()?;
        if self.interval()?.is_zero() {
            return Err(ConfigError::Invalid(
                "retention.interval must be longer than 0".into(),
            ));
        }
        if self.batch_runs == 0 {
            return Err(ConfigError::Invalid(
                "retention.batch_runs must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

fn invalid(key: &str, value: &str, why: &str) -> ConfigError {
    ConfigError::Invalid(format!("{key} = {value:?}: {why}"))
}

/// Parses `"30d"`, `"12h"`, `"90m"`, `"45s"`, `"500ms"` (one number, one unit).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| "a duration needs a unit: ms, s, m, h or d (e.g. \"30d\")".to_string())?;
    let (number, unit) = s.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| "a duration starts with a whole number (e.g. \"30d\")".to_string())?;
    let ms = match unit {
        "ms" => Some(n),
        "s" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        "d" => n.checked_mul(86_400_000),
        other => return Err(format!("unknown unit {other:?}: use ms, s, m, h or d")),
    };
    ms.map(Duration::from_millis)
        .ok_or_else(|| "the duration is too long".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_their_unit_only() {
        assert_eq!(
            parse_duration("30d").unwrap(),
            Duration::from_secs(30 * 86400)
        );
        assert_eq!(parse_duration("90m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert!(parse_duration("30").unwrap_err().contains("unit"));
        assert!(parse_duration("d").unwrap_err().contains("whole number"));
        assert!(parse_duration("3w").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("99999999999999999d").is_err());
    }
}
