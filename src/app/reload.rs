//! Reloading namespaces and tokens without a restart: on `SIGHUP`, and when the config file
//! or a token file it names changes (polled: a `stat` of a few files every
//! [`POLL`], cheaper than a watcher crate and the same on every platform).
//!
//! A reload builds a whole new [`Table`] from the configuration as it is now; if anything in
//! it is invalid the old table stays in force and the log says why. Applied, it takes effect
//! for the next request on every service at once ([`Namespaces::apply`]); streams whose
//! token it revoked close (`api::Caller::revoked`); calls in flight finish.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::bridge::Bridges;
use crate::config::Config;
use crate::namespaces::{Namespaces, Table};

/// How often the watched files are checked.
pub const POLL: Duration = Duration::from_secs(2);

/// Loads the configuration the daemon was started with, as it is now (file, environment,
/// command-line overrides), validated.
pub type LoadConfig = Arc<dyn Fn() -> anyhow::Result<Config> + Send + Sync>;

/// Where a reload reads the configuration from.
#[derive(Clone)]
pub struct ReloadSource {
    /// The config file, watched for changes (`None`: defaults and environment only).
    pub file: Option<PathBuf>,
    pub load: LoadConfig,
}

/// Builds and applies tables. Cheap to clone.
#[derive(Clone)]
pub struct Reloader {
    pub(crate) namespaces: Namespaces,
    pub(crate) bridges: Bridges,
    /// Whether the tool registry serves a tool (allowlists are checked against it).
    pub(crate) serves: Arc<dyn Fn(&str) -> bool + Send + Sync>,
    pub(crate) source: Option<ReloadSource>,
}

impl Reloader {
    /// Puts `config`'s namespaces and tokens in force, or leaves everything as it was.
    pub fn apply(&self, config: &Config) -> anyhow::Result<()> {
        let table = table_of(config, &*self.serves)?;
        self.bridges
            .configure(&table)
            .map_err(|e| anyhow::anyhow!(e))?;
        let names: Vec<String> = table
            .names()
            .iter()
            .map(|n| n.as_str().to_string())
            .collect();
        self.namespaces.apply(table);
        tracing::info!(
            namespaces = %names.join(","),
            "reloaded namespaces and tokens (other settings take effect at the next start)"
        );
        Ok(())
    }

    /// Reloads from the source: what `SIGHUP` does. `false` (logged) if it was refused.
    pub fn reload(&self) -> bool {
        let Some(source) = &self.source else {
            tracing::warn!("reload requested, but this daemon has no configuration to reload");
            return false;
        };
        match (source.load)().and_then(|config| self.apply(&config)) {
            Ok(()) => true,
            Err(e) => {
                let e = crate::error_chain::Chain(&e);
                tracing::error!(
                    "reload refused, the previous namespaces and tokens stay in force: {e}"
                );
                false
            }
        }
    }

    /// The files whose change triggers a reload.
    fn watched(&self) -> Vec<PathBuf> {
        let mut files = self.namespaces.table().files.clone();
        if let Some(f) = self.source.as_ref().and_then(|s| s.file.clone()) {
            files.push(f);
        }
        files
    }

    /// Reloads on `SIGHUP` and when a watched file changes, until the task is aborted.
    pub async fn watch(self) {
        if self.source.is_none() {
            return;
        }
        let mut hup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGHUP; reload by file change only");
                None
            }
        };
        let mut seen = stamps(&self.watched());
        loop {
            tokio::select! {
                Some(()) = async { match hup.as_mut() { Some(h) => h.recv().await, None => None } } => {
                    tracing::info!("SIGHUP: reloading namespaces and tokens");
                    self.reload();
                    seen = stamps(&self.watched());
                }
                () = tokio::time::sleep(POLL) => {
                    let now = stamps(&self.watched());
                    if now != seen {
                        tracing::info!("the config or a token file changed: reloading namespaces and tokens");
                        self.reload();
                        seen = stamps(&self.watched());
                    }
                }
            }
        }
    }
}

/// The table of `config` (its default namespace's tokens found as the daemon resolved them
/// at startup), with allowlists checked against `serves`.
///
/// `tokens::find`, never `resolve`: a reload must not generate new default tokens (a deleted
/// tokens file would otherwise lock the running bridge out); it is refused instead.
fn table_of(config: &Config, serves: &dyn Fn(&str) -> bool) -> anyhow::Result<Table> {
    let tokens = crate::tokens::find(&config.auth, &config.api, &config.store.path)?;
    let table = Table::build(config, &tokens, &|k| std::env::var(k).ok())?;
    table.check_tools(serves)?;
    Ok(table)
}

/// What identifies a file's version: its modification time and size (`None`: missing).
type Stamp = Option<(SystemTime, u64)>;

fn stamps(files: &[PathBuf]) -> Vec<(PathBuf, Stamp)> {
    files
        .iter()
        .map(|f| {
            let stamp = std::fs::metadata(f)
                .ok()
                .and_then(|m| Some((m.modified().ok()?, m.len())));
            (f.clone(), stamp)
        })
        .collect()
}
