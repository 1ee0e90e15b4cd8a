//! Choosing and opening a backend: the one place that knows which backends exist. The
//! daemon, `callbackd migrate` and `callbackd check` all go through here, so none of them
//! reaches into a backend's module.

use std::sync::Arc;
use std::time::Duration;

use super::check::CheckReport;
use super::postgres::{self, PgOptions, PgStore};
use super::sqlite::{self, SqliteOptions, SqliteStore};
use super::{Store, StoreError};
use crate::config::{is_postgres_url, BackendKind, StoreConfig};
use crate::secret::Secret;

/// A backend and how to open it (built from `[store]`: [`BackendOptions::from`]).
#[derive(Debug, Clone)]
pub enum BackendOptions {
    Sqlite(SqliteOptions),
    Postgres(PgOptions),
}

impl From<&StoreConfig> for BackendOptions {
    /// The backend `[store]` chooses, and how to open it (after `Config::validate`).
    fn from(config: &StoreConfig) -> Self {
        match (config.backend, &config.url) {
            (BackendKind::Postgres, Some(url)) => BackendOptions::Postgres(pg_options(config, url)),
            _ => BackendOptions::Sqlite(config.sqlite_options()),
        }
    }
}

fn pg_options(config: &StoreConfig, url: &Secret) -> PgOptions {
    let mut opts = PgOptions::new(url.expose());
    opts.schema = config.schema.clone();
    opts.pool_size = config.pool_size;
    opts.connect_timeout = Duration::from_millis(config.connect_timeout_ms);
    opts.statement_timeout = Duration::from_millis(config.statement_timeout_ms);
    opts.prepared_statements = config.prepared_statements;
    opts.max_page_size = config.max_page_size;
    opts
}

/// The store's reading of `[store]` (kept here, beside the backends, so the config stays a
/// leaf that knows no backend).
impl StoreConfig {
    /// The backend these settings choose: [`BackendOptions::from`].
    pub fn backend(&self) -> BackendOptions {
        BackendOptions::from(self)
    }

    /// The SQLite options of these settings (whatever `backend` says).
    pub fn sqlite_options(&self) -> SqliteOptions {
        let mut opts = SqliteOptions::new(&self.path);
        opts.sync = self.sync;
        opts.max_page_size = self.max_page_size;
        opts.busy_timeout = Duration::from_millis(self.busy_timeout_ms);
        opts.max_page_count = self.max_pages;
        opts
    }
}

/// Why a backend could not be opened, migrated or checked; each message names the store
/// (file or URL without its password) and what to fix.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error(transparent)]
    SqliteOpen(#[from] sqlite::OpenError),
    #[error(transparent)]
    PostgresOpen(#[from] postgres::OpenError),
    #[error("checking {store}")]
    Check { store: String, source: StoreError },
    #[error("database {path} does not exist")]
    SqliteMissing { path: std::path::PathBuf },
    #[error("checking {path}")]
    SqliteCheck {
        path: std::path::PathBuf,
        source: rusqlite::Error,
    },
    #[error("the store task failed: {0}")]
    Task(String),
}

impl BackendOptions {
    /// The store as a person names it: the database file.
    pub fn describe(&self) -> String {
        match self {
            BackendOptions::Sqlite(o) => format!("database {}", o.path.display()),
            BackendOptions::Postgres(o) => {
                format!("PostgreSQL {}", postgres::redact_url(o.url.expose()))
            }
        }
    }

    /// The database file, for SQLite.
    pub fn sqlite_path(&self) -> Option<&std::path::Path> {
        match self {
            BackendOptions::Sqlite(o) => Some(&o.path),
            BackendOptions::Postgres(_) => None,
        }
    }

    /// Opens and migrates the store.
    pub async fn open(&self) -> Result<Arc<dyn Store>, BackendError> {
        match self {
            BackendOptions::Sqlite(opts) => {
                let opts = opts.clone();
                let store = tokio::task::spawn_blocking(move || SqliteStore::open(&opts))
                    .await
                    .map_err(|e| BackendError::Task(e.to_string()))??;
                Ok(Arc::new(store))
            }
            BackendOptions::Postgres(opts) => Ok(Arc::new(PgStore::open(opts).await?)),
        }
    }

    /// Creates or upgrades the schema, and returns the version it is at.
    pub async fn migrate(&self) -> Result<u32, BackendError> {
        let store = self.open().await?;
        drop(store);
        Ok(match self {
            BackendOptions::Sqlite(_) => sqlite::migrate::LATEST_VERSION,
            BackendOptions::Postgres(_) => postgres::migrate::LATEST_VERSION,
        })
    }

    /// Verifies the stored data offline (safe while a daemon serves it).
    pub async fn check(&self) -> Result<CheckReport, BackendError> {
        match self {
            BackendOptions::Sqlite(opts) => {
                let path = opts.path.clone();
                if !path.exists() {
                    return Err(BackendError::SqliteMissing { path });
                }
                tokio::task::spawn_blocking(move || {
                    sqlite::check::check(&path)
                        .map_err(|source| BackendError::SqliteCheck { path, source })
                })
                .await
                .map_err(|e| BackendError::Task(e.to_string()))?
            }
            BackendOptions::Postgres(opts) => {
                let store = PgStore::connect(opts, false).await?;
                store.check().await.map_err(|source| BackendError::Check {
                    store: self.describe(),
                    source,
                })
            }
        }
    }
}

/// One side of `callbackd copy-store`: a `postgres://` URL (in `schema`, if given) or a
/// SQLite file. A target is created and migrated first; a source must exist.
pub async fn transfer_side(
    location: &str,
    schema: Option<String>,
    target: bool,
) -> Result<Box<dyn super::transfer::Transfer>, super::transfer::TransferError> {
    if is_postgres_url(location) {
        let mut opts = PgOptions::new(location);
        opts.schema = schema;
        let side = postgres::transfer::PgTransfer::open(&opts, target).await?;
        return Ok(Box::new(side));
    }
    let path = std::path::Path::new(location);
    let side = if target {
        sqlite::transfer::SqliteTransfer::target(path)?
    } else {
        sqlite::transfer::SqliteTransfer::source(path)?
    };
    Ok(Box::new(side))
}
