//! [`ConfigError`]: what is wrong with a configuration, said so that it can be fixed.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid config file {path}: {source}")]
    Parse {
        path: PathBuf,
        source: toml::de::Error,
    },
    #[error("invalid value {value:?} in environment variable {var}: {reason}")]
    Env {
        var: &'static str,
        value: String,
        reason: String,
    },
    #[error("invalid configuration: {0}")]
    Invalid(String),
    #[error("token file {path}: {source}")]
    TokenFile {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A command that only reads the tokens (`bridge-args`) found no tokens file.
    #[error(
        "no tokens file at {path} (or none with the run API's tokens yet): the daemon writes \
         them when it starts; start it with `callbackd serve` or `callbackd run -- <bridge>` (with \
         the same --config/--db), or set the tokens in the environment or the config"
    )]
    NoTokens { path: PathBuf },
}
