//! `[store]`: where the agent state lives (SQLite or PostgreSQL) and how it is opened. How
//! these settings open a backend is the store's business (`store::backend`).

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ConfigError;
use crate::secret::{redact_url, Secret};

/// `store.backend`: where the agent state lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// One SQLite file on this host.
    #[default]
    Sqlite,
    /// A PostgreSQL database, shareable by several daemons.
    Postgres,
}

/// How hard a commit tries to reach the disk (`store.sync` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SyncMode {
    /// `synchronous=NORMAL`: an acknowledged write survives the daemon being killed
    /// (`kill -9`, a crash); an OS crash or power cut may lose the last commits, never
    /// corrupts the database.
    #[default]
    Normal,
    /// `synchronous=FULL`: every commit is fsynced before it is acknowledged; it also
    /// survives an OS crash or power cut. Slower on disks with slow fsync.
    Full,
}

/// `[store]`: where the agent state lives (SQLite or PostgreSQL) and how it is opened.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// "sqlite": one database file on this host. "postgres": a PostgreSQL database that
    /// several daemons, on several hosts, can share (`store.url`).
    pub backend: BackendKind,
    /// The SQLite database (created with mode 0600, WAL mode). Default: callbackd.db in the
    /// user's data directory, $XDG_DATA_HOME/callbackd, else ~/.local/share/callbackd
    /// (created mode 0700), never the working directory. With backend = "postgres" only the
    /// generated tokens file is placed by it ("<stem>.tokens" next to it).
    #[schemars(transform = super::reference::no_default, example = "/var/lib/callbackd/callbackd.db")]
    pub path: PathBuf,
    /// How hard a commit tries to reach the disk.
    pub sync: SyncMode,
    /// Largest page any list returns; larger `limit`s are cut and continue via the cursor.
    pub max_page_size: usize,
    /// How long to wait for a lock held by another process (e.g. an inspection tool).
    pub busy_timeout_ms: u64,
    /// Caps the database at this many pages (SQLite `max_page_count`; pages are 4 KiB), so
    /// writes beyond it answer `resource_exhausted` as on a full disk. For tests of the
    /// full-disk path and as a crude quota; unset (no cap) by default.
    #[schemars(example = 25600)]
    pub max_pages: Option<u64>,
    /// PostgreSQL: the server, as a libpq URL (or CALLBACKD_STORE_URL, which also selects
    /// the backend). Only plain TCP/Unix connections (no TLS): sslmode=disable or prefer.
    /// It may carry a password: never printed.
    #[schemars(example = "postgres://callbackd:secret@db.internal:5432/callbackd")]
    pub url: Option<Secret>,
    /// PostgreSQL: the schema of the tables (created if missing); unset: the server's
    /// default (public).
    #[schemars(example = &"callbackd")]
    pub schema: Option<String>,
    /// PostgreSQL: connections this daemon keeps to the server.
    pub pool_size: usize,
    /// PostgreSQL: how long to wait for a connection (at start, and for a pooled one under
    /// load).
    pub connect_timeout_ms: u64,
    /// PostgreSQL: server-side limit of one statement (`statement_timeout`); 0: none.
    pub statement_timeout_ms: u64,
    /// PostgreSQL: false behind a transaction-mode pooler (PgBouncer, RDS Proxy): every
    /// statement is then sent unprepared, in one round trip with its parameter types.
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

/// Whether `s` names a PostgreSQL server rather than a SQLite file.
pub fn is_postgres_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

impl StoreConfig {
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

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.path.as_os_str().is_empty() {
            return Err(ConfigError::Invalid(
                "store.path is empty, and there is no data directory for the default \
                 (neither XDG_DATA_HOME nor HOME is set to an absolute path): pass --db or set \
                 store.path"
                    .into(),
            ));
        }
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
                        redact_url(url.expose())
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
        if self.max_page_size == 0 {
            return Err(ConfigError::Invalid(
                "store.max_page_size must be at least 1".into(),
            ));
        }
        Ok(())
    }
}
