//! Configuration: defaults < TOML file < environment < command-line flags, validated right
//! after loading so a bad setting fails at startup, not on the first call.
//!
//! Every key is shown, with its default and what it does, in
//! `config/callbackd.example.toml` (embedded as [`EXAMPLE`] and parsed in a test).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::secret::Secret;
use crate::store::backend::BackendOptions;
use crate::store::postgres::PgOptions;
use crate::store::sqlite::{SqliteOptions, SyncMode};

/// The commented example configuration (`callbackd print-config`).
pub const EXAMPLE: &str = include_str!("../config/callbackd.example.toml");

/// Default listen address: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7420";

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

/// The daemon's configuration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    pub auth: AuthConfig,
    pub store: StoreConfig,
    pub tools: ToolsConfig,
    pub log: LogConfig,
    pub api: crate::api::config::ApiConfig,
    pub bridge: crate::api::config::BridgeConfig,
    pub retention: crate::api::config::RetentionConfig,
    pub metrics: crate::metrics::config::MetricsConfig,
    /// `[[namespaces]]`: more bridges on this daemon (docs/namespaces.md).
    pub namespaces: Vec<crate::namespaces::NamespaceConfig>,
}

/// A command tool's program given as a relative path, made absolute against `dir` (the
/// config file's directory, `""` for the working directory); `None` for a bare name, left to
/// PATH, or an absolute path.
fn program_next_to(dir: &Path, program: &str) -> Option<String> {
    let path = Path::new(program);
    if !program.contains('/') || path.is_absolute() {
        return None;
    }
    let joined = dir.join(path);
    let absolute = std::path::absolute(&joined).unwrap_or(joined);
    Some(absolute.to_string_lossy().into_owned())
}

/// Upper bound of `server.threads`.
const MAX_SERVER_THREADS: usize = 1024;

/// `[server]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// `ADDR:PORT` to listen on. Port 0 picks a free port.
    pub listen: String,
    /// Must be set to listen on a non-loopback address: the callbacks carry agent state.
    pub allow_remote: bool,
    /// Largest request body, as sent and after decompression.
    pub max_body_bytes: usize,
    pub max_connections: usize,
    pub header_read_timeout_ms: u64,
    pub body_read_timeout_ms: u64,
    pub shutdown_grace_ms: u64,
    /// Threads that serve connections; 0: one per CPU.
    pub threads: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: DEFAULT_LISTEN.into(),
            allow_remote: false,
            max_body_bytes: 32 * 1024 * 1024,
            max_connections: 512,
            header_read_timeout_ms: 20_000,
            body_read_timeout_ms: 30_000,
            shutdown_grace_ms: 10_000,
            threads: 0,
        }
    }
}

impl ServerConfig {
    pub fn listen_addr(&self) -> Result<SocketAddr, ConfigError> {
        self.listen.parse().map_err(|_| {
            ConfigError::Invalid(format!(
                "server.listen {:?} is not an ADDR:PORT socket address",
                self.listen
            ))
        })
    }
}

/// `[auth]`: the bearer tokens the bridge presents. Each comes from the first of: its
/// environment variable, the value here, the file named here; otherwise it is generated
/// once and kept (mode 0600) next to the database.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    pub store_token: Option<Secret>,
    pub store_token_file: Option<PathBuf>,
    pub tool_token: Option<Secret>,
    pub tool_token_file: Option<PathBuf>,
}

/// `store.backend`: where the agent state lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// One SQLite file on this host.
    #[default]
    Sqlite,
    /// A PostgreSQL database, shareable by several daemons.
    Postgres,
}

/// `[store]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    pub backend: BackendKind,
    /// The SQLite database file, by default in the user's data directory (`data_dir`); with
    /// PostgreSQL, where the generated tokens file goes.
    pub path: PathBuf,
    pub sync: SyncMode,
    pub max_page_size: usize,
    pub busy_timeout_ms: u64,
    /// Caps the database at this many pages (SQLite `max_page_count`; pages are 4 KiB), so
    /// writes beyond it answer `resource_exhausted` as on a full disk. For tests of the
    /// full-disk path and as a crude quota; unset (no cap) by default.
    pub max_pages: Option<u64>,
    /// PostgreSQL: the server's URL (it may carry a password: never printed).
    pub url: Option<Secret>,
    /// PostgreSQL: the schema of the tables (created if missing); unset: the default.
    pub schema: Option<String>,
    pub pool_size: usize,
    pub connect_timeout_ms: u64,
    pub statement_timeout_ms: u64,
    pub prepared_statements: bool,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            backend: BackendKind::Sqlite,
            path: crate::data_dir::default_db(),
            sync: SyncMode::Normal,
            max_page_size: 1000,
            busy_timeout_ms: 5000,
            max_pages: None,
            url: None,
            schema: None,
            pool_size: 16,
            connect_timeout_ms: 5000,
            statement_timeout_ms: 30_000,
            prepared_statements: true,
        }
    }
}

impl StoreConfig {
    /// The backend these settings choose, and how to open it (after [`Config::validate`]).
    pub fn backend(&self) -> BackendOptions {
        match (self.backend, &self.url) {
            (BackendKind::Postgres, Some(url)) => BackendOptions::Postgres(self.pg_options(url)),
            _ => BackendOptions::Sqlite(self.sqlite_options()),
        }
    }

    /// Points the store at `location`: a `postgres://` or `postgresql://` URL selects
    /// PostgreSQL, anything else is a SQLite file (`--db`, `copy-store`).
    pub fn set_location(&mut self, location: &str) {
        if is_postgres_url(location) {
            self.backend = BackendKind::Postgres;
            self.url = Some(Secret::new(location.to_string()));
        } else {
            self.backend = BackendKind::Sqlite;
            self.url = None;
            self.path = PathBuf::from(location);
        }
    }

    fn pg_options(&self, url: &Secret) -> PgOptions {
        let mut opts = PgOptions::new(url.expose());
        opts.schema = self.schema.clone();
        opts.pool_size = self.pool_size;
        opts.connect_timeout = Duration::from_millis(self.connect_timeout_ms);
        opts.statement_timeout = Duration::from_millis(self.statement_timeout_ms);
        opts.prepared_statements = self.prepared_statements;
        opts.max_page_size = self.max_page_size;
        opts
    }

    fn validate(&self) -> Result<(), ConfigError> {
        match (self.backend, &self.url) {
            (BackendKind::Postgres, None) => {
                return Err(ConfigError::Invalid(
                    "store.backend is \"postgres\" but store.url is not set; set it (or \
                     CALLBACKD_STORE_URL) to postgres://user:password@host:port/database"
                        .into(),
                ))
            }
            (BackendKind::Sqlite, Some(_)) => {
                return Err(ConfigError::Invalid(
                    "store.url is set but store.backend is \"sqlite\"; set store.backend = \
                     \"postgres\" to use the URL, or remove it"
                        .into(),
                ))
            }
            (BackendKind::Postgres, Some(url)) => {
                if url.expose().parse::<tokio_postgres::Config>().is_err() {
                    return Err(ConfigError::Invalid(format!(
                        "store.url {} is not a valid PostgreSQL URL (expected \
                         postgres://user:password@host:port/database)",
                        crate::store::postgres::redact_url(url.expose())
                    )));
                }
            }
            (BackendKind::Sqlite, None) => {}
        }
        if let Some(schema) = &self.schema {
            let ok = schema.len() <= 63
                && schema
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && schema
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                return Err(ConfigError::Invalid(format!(
                    "store.schema {schema:?} must be a plain identifier: letters, digits and _, \
                     not starting with a digit, at most 63 characters"
                )));
            }
        }
        if self.pool_size == 0 {
            return Err(ConfigError::Invalid(
                "store.pool_size must be at least 1".into(),
            ));
        }
        if self.connect_timeout_ms == 0 {
            return Err(ConfigError::Invalid(
                "store.connect_timeout_ms must be at least 1".into(),
            ));
        }
        Ok(())
    }

    pub fn sqlite_options(&self) -> SqliteOptions {
        let mut opts = SqliteOptions::new(&self.path);
        opts.sync = self.sync;
        opts.max_page_size = self.max_page_size;
        opts.busy_timeout = Duration::from_millis(self.busy_timeout_ms);
        opts.max_page_count = self.max_pages;
        opts
    }
}

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
    pub limits: std::collections::BTreeMap<String, ToolLimitsConfig>,
    /// `[[tools.command]]`: tools that run a program.
    pub command: Vec<CommandToolConfig>,
}

/// One `[tools.limits.NAME]` table: for built-in and plugin tools, whose limits are set in
/// code, this is the one place to change them without a rebuild.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolLimitsConfig {
    pub timeout_ms: Option<u64>,
    pub max_concurrency: Option<usize>,
    /// When a call waits for a person's decision (`approvals::policy`).
    pub approval: Option<crate::approvals::policy::ApprovalSetting>,
    /// How long a held call waits before it is denied; default 10 minutes.
    pub approval_timeout_ms: Option<u64>,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        ToolsConfig {
            timeout_ms: 60_000,
            max_concurrency: 16,
            disabled: Vec::new(),
            limits: Default::default(),
            command: Vec::new(),
        }
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
    pub env: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub max_concurrency: Option<usize>,
    /// Largest stdout accepted; more fails the call and stops the program.
    #[serde(default)]
    pub max_output_bytes: Option<usize>,
    /// As in `[tools.limits.NAME]`: when a call waits for a person's decision.
    #[serde(default)]
    pub approval: Option<crate::approvals::policy::ApprovalSetting>,
    #[serde(default)]
    pub approval_timeout_ms: Option<u64>,
}

/// `[log]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// A tracing filter: `info`, `debug`, `callbackd=debug,warn`, ...
    pub level: String,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Environment variables read by [`Config::apply_env`].
pub mod env {
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
}

impl Config {
    /// Reads a TOML file. Relative paths in it are taken relative to the file's directory.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut config: Config = toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
        // "" for a bare file name: the file is in the working directory.
        config.rebase(path.parent().unwrap_or(Path::new("")));
        Ok(config)
    }

    /// Makes the relative paths of a config file relative to `dir`, the file's directory
    /// (`""` when that is the working directory, which leaves them as they are).
    fn rebase(&mut self, dir: &Path) {
        let fix = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = dir.join(&*p);
            }
        };
        fix(&mut self.store.path);
        if let Some(p) = self.auth.store_token_file.as_mut() {
            fix(p);
        }
        if let Some(p) = self.auth.tool_token_file.as_mut() {
            fix(p);
        }
        for p in [
            &mut self.api.token_file,
            &mut self.api.read_token_file,
            &mut self.bridge.token_file,
            &mut self.metrics.token_file,
        ]
        .into_iter()
        .flatten()
        {
            fix(p);
        }
        for ns in &mut self.namespaces {
            ns.rebase(&fix);
        }
        for tool in &mut self.tools.command {
            if let Some(p) = tool.cwd.as_mut() {
                fix(p);
            }
            // A program given as a relative path ("./tools/wc.sh", "bin/x") is the file next
            // to the config too, made absolute: left relative, exec would look for it in the
            // tool's `cwd`. A bare name ("python3") is looked up in PATH as usual.
            if let Some(program) = tool.argv.first_mut() {
                if let Some(absolute) = program_next_to(dir, program) {
                    *program = absolute;
                }
            }
        }
    }

    /// Applies the `CALLBACKD_*` environment variables (`get` is `std::env::var` outside
    /// tests).
    pub fn apply_env(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        if let Some(v) = get(env::LISTEN) {
            self.server.listen = v;
        }
        if let Some(v) = get(env::ALLOW_REMOTE) {
            self.server.allow_remote = match v.as_str() {
                "1" | "true" | "yes" => true,
                "0" | "false" | "no" | "" => false,
                _ => {
                    return Err(ConfigError::Env {
                        var: env::ALLOW_REMOTE,
                        value: v,
                        reason: "expected true or false".into(),
                    })
                }
            };
        }
        if let Some(v) = get(env::DB) {
            self.store.path = PathBuf::from(v);
        }
        if let Some(v) = get(env::STORE_URL).filter(|v| !v.is_empty()) {
            self.store.backend = BackendKind::Postgres;
            self.store.url = Some(Secret::new(v));
        }
        if let Some(v) = get(env::STORE_TOKEN) {
            self.auth.store_token = Some(Secret::new(v));
        }
        if let Some(v) = get(env::TOOL_TOKEN) {
            self.auth.tool_token = Some(Secret::new(v));
        }
        if let Some(v) = get(env::LOG) {
            self.log.level = v;
        }
        if let Some(v) = get(env::API_TOKEN) {
            self.api.token = Some(Secret::new(v));
        }
        if let Some(v) = get(env::API_READ_TOKEN) {
            self.api.read_token = Some(Secret::new(v));
        }
        if let Some(v) = get(crate::metrics::config::TOKEN_ENV) {
            self.metrics.token = Some(Secret::new(v));
        }
        Ok(())
    }

    /// The model of sessions created without one.
    pub fn bridge_model(&self) -> String {
        self.bridge.model()
    }

    /// The API key passed with new sessions: `[bridge] api_key`, else `CURSOR_API_KEY` of
    /// the daemon's environment (the bridge may hold its own as well).
    pub fn bridge_api_key(&self) -> String {
        self.bridge.api_key()
    }

    /// Loads the configuration the way the daemon does: the file (if any), then the
    /// environment. Command-line overrides are applied by the caller, then [`validate`].
    ///
    /// [`validate`]: Config::validate
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let mut config = match file {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        config.apply_env(|k| std::env::var(k).ok())?;
        Ok(config)
    }

    /// Checks the settings that can be checked without touching the network or the disk.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let addr = self.server.listen_addr()?;
        if !addr.ip().is_loopback() && !self.server.allow_remote {
            return Err(ConfigError::Invalid(format!(
                "server.listen {addr} is not a loopback address; set server.allow_remote = true \
                 (or CALLBACKD_ALLOW_REMOTE=true) to accept callbacks from other hosts"
            )));
        }
        if self.server.max_body_bytes < 1024 {
            return Err(ConfigError::Invalid(
                "server.max_body_bytes must be at least 1024".into(),
            ));
        }
        if self.server.max_connections == 0 {
            return Err(ConfigError::Invalid(
                "server.max_connections must be at least 1".into(),
            ));
        }
        if self.server.threads > MAX_SERVER_THREADS {
            return Err(ConfigError::Invalid(format!(
                "server.threads is {}; more than {MAX_SERVER_THREADS} connection threads is \
                 surely a mistake (0: one per CPU)",
                self.server.threads
            )));
        }
        if self.store.path.as_os_str().is_empty() {
            return Err(ConfigError::Invalid(
                "store.path is empty, and there is no data directory for the default \
                 (neither XDG_DATA_HOME nor HOME is set to an absolute path): pass --db or set \
                 store.path"
                    .into(),
            ));
        }
        self.store.validate()?;
        if self.store.max_page_size == 0 {
            return Err(ConfigError::Invalid(
                "store.max_page_size must be at least 1".into(),
            ));
        }
        self.api.validate()?;
        self.retention.validate()?;
        for (name, token) in [
            ("store_token", &self.auth.store_token),
            ("tool_token", &self.auth.tool_token),
            ("api.token", &self.api.token),
            ("api.read_token", &self.api.read_token),
        ] {
            if let Some(t) = token {
                check_token(name, t)?;
            }
        }
        if self.tools.max_concurrency == 0 {
            return Err(ConfigError::Invalid(
                "tools.max_concurrency must be at least 1".into(),
            ));
        }
        if self.tools.timeout_ms == 0 {
            return Err(ConfigError::Invalid(
                "tools.timeout_ms must be at least 1".into(),
            ));
        }
        for (name, limits) in &self.tools.limits {
            if limits.timeout_ms == Some(0) || limits.max_concurrency == Some(0) {
                return Err(ConfigError::Invalid(format!(
                    "tools.limits.{name}: timeout_ms and max_concurrency must be at least 1"
                )));
            }
        }
        Ok(())
    }
}

/// Whether `s` names a PostgreSQL server rather than a SQLite file.
pub fn is_postgres_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

/// A token must fit in an HTTP header: visible ASCII, no spaces.
pub(crate) fn check_token(name: &str, token: &Secret) -> Result<(), ConfigError> {
    let t = token.expose();
    // "store_token" is `auth.store_token`; "api.token" names its section itself.
    let key = if name.contains('.') {
        name.to_string()
    } else {
        format!("auth.{name}")
    };
    if t.is_empty() {
        return Err(ConfigError::Invalid(format!("{key} is empty")));
    }
    if !t.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ConfigError::Invalid(format!(
            "{key} must be visible ASCII without spaces"
        )));
    }
    Ok(())
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Secret::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_config_parses_and_matches_the_defaults() {
        let example: Config = toml::from_str(EXAMPLE).expect("example config parses");
        example.validate().unwrap();
        let default = Config::default();
        assert_eq!(example.server.listen, default.server.listen);
        assert_eq!(example.server.max_body_bytes, default.server.max_body_bytes);
        assert_eq!(example.store.sync, default.store.sync);
        assert_eq!(example.tools.timeout_ms, default.tools.timeout_ms);
    }

    #[test]
    fn tool_limits_parse_from_toml_and_zero_is_refused() {
        let config: Config =
            toml::from_str("[tools.limits.memory]\ntimeout_ms = 5000\nmax_concurrency = 2\n")
                .unwrap();
        let memory = &config.tools.limits["memory"];
        assert_eq!(
            (memory.timeout_ms, memory.max_concurrency),
            (Some(5000), Some(2))
        );
        let zero: Config = toml::from_str("[tools.limits.echo]\nmax_concurrency = 0\n").unwrap();
        let err = zero.validate().unwrap_err().to_string();
        assert!(err.contains("tools.limits.echo"), "{err}");
        assert!(toml::from_str::<Config>("[tools.limits.echo]\ntimeout = 1\n").is_err());
    }

    #[test]
    fn a_command_tools_relative_program_is_next_to_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            "[[tools.command]]\nname = \"a\"\nargv = [\"./bin/a.sh\", \"./arg\"]\ncwd = \"work\"\n\
             [[tools.command]]\nname = \"b\"\nargv = [\"python3\"]\n",
        )
        .unwrap();
        let config = Config::from_file(&path).unwrap();
        let [a, b] = &config.tools.command[..] else {
            panic!("two tools")
        };
        assert_eq!(Path::new(&a.argv[0]), dir.path().join("./bin/a.sh"));
        assert!(Path::new(&a.argv[0]).is_absolute());
        assert_eq!(a.argv[1], "./arg", "arguments are the program's business");
        assert_eq!(a.cwd.as_deref(), Some(dir.path().join("work").as_path()));
        assert_eq!(b.argv, ["python3"]);
    }

    #[test]
    fn a_relative_program_of_a_config_in_the_working_directory_is_made_absolute() {
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            program_next_to(Path::new(""), "./bin/x").map(PathBuf::from),
            Some(cwd.join("bin/x"))
        );
        assert_eq!(
            program_next_to(Path::new("/etc/callbackd"), "tools/x"),
            Some("/etc/callbackd/tools/x".into())
        );
        assert_eq!(program_next_to(Path::new("/etc"), "python3"), None);
        assert_eq!(program_next_to(Path::new("/etc"), "/usr/bin/x"), None);
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let err = toml::from_str::<Config>("[server]\nlisten_on = \"x\"\n").unwrap_err();
        assert!(err.to_string().contains("listen_on"));
    }

    #[test]
    fn environment_overrides_the_file_and_defaults() {
        let mut config: Config =
            toml::from_str("[server]\nlisten = \"127.0.0.1:1\"\n[store]\npath = \"file.db\"\n")
                .unwrap();
        assert_eq!(config.store.path, PathBuf::from("file.db"));
        config
            .apply_env(|k| match k {
                env::LISTEN => Some("127.0.0.1:2".into()),
                env::STORE_TOKEN => Some("from-env".into()),
                _ => None,
            })
            .unwrap();
        assert_eq!(config.server.listen, "127.0.0.1:2");
        assert_eq!(config.store.path, PathBuf::from("file.db"));
        assert_eq!(config.auth.store_token.unwrap().expose(), "from-env");
    }

    #[test]
    fn non_loopback_listen_needs_allow_remote() {
        let mut config = Config::default();
        config.server.listen = "0.0.0.0:7420".into();
        assert!(config
            .validate()
            .unwrap_err()
            .to_string()
            .contains("allow_remote"));
        config.server.allow_remote = true;
        config.validate().unwrap();
    }

    #[test]
    fn relative_paths_in_a_file_are_relative_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "[store]\npath = \"data/x.db\"\n").unwrap();
        let config = Config::from_file(&path).unwrap();
        assert_eq!(config.store.path, dir.path().join("data/x.db"));
    }
}
