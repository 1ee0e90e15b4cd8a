//! `callbackd prune`: remove the events of terminal runs that ended long enough ago, with a
//! net under it.
//!
//! - `--dry-run` says what would go (runs, events, payload bytes) and changes nothing.
//! - On a terminal, without `--yes`, the same preview is shown and a `y` is asked for.
//!   Without a terminal (cron, scripts that already call `prune`) it proceeds as it always
//!   did: prune is the documented retention tool, refusing there would silently stop a
//!   cleanup job that has no one to read a question. `--yes` skips the question anywhere.
//! - Afterwards the space is given back: the store frees pages as it prunes (SQLite's
//!   `incremental_vacuum`), and a `wal_checkpoint(TRUNCATE)` folds the WAL into the file
//!   and truncates both, so the sizes reported (database file plus its `-wal`) fall.
//!
//! The preview is the store's own count (`RunRecords::prune_preview`, one query written
//! once for SQLite and PostgreSQL), with the same predicate as the prune that follows.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;

use callbackd::cli::ConfigArgs;

use super::{block_on, load};

/// The size of a SQLite database on disk: its file and its `-wal`, where recent writes are
/// until a checkpoint (the main file alone can read 4096 bytes while megabytes sit in the WAL).
pub fn database_bytes(db: &Path) -> u64 {
    let sizes = callbackd::store::sqlite::files::sizes(db);
    sizes.database + sizes.wal
}

/// The options of `callbackd prune`.
#[derive(Debug, Clone, Default)]
pub struct PruneOptions {
    pub older_than: Option<String>,
    pub dry_run: bool,
    pub yes: bool,
}

/// `callbackd prune`.
pub fn run(config: &ConfigArgs, opts: &PruneOptions) -> anyhow::Result<()> {
    let config = load(config)?;
    let age = match opts.older_than.as_deref() {
        Some(s) => callbackd::config::parse_duration(s)
            .map_err(|e| anyhow::anyhow!("--older-than {s:?}: {e}"))?,
        None => config.retention.max_age()?.context(
            "nothing to prune by: give --older-than DURATION or set retention.events_max_age",
        )?,
    };
    let ended_before_ms =
        callbackd::store::event_doc::now_ms() - i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
    let backend = config.store.backend();
    let file: Option<PathBuf> = backend.sqlite_path().map(Path::to_path_buf);
    if let Some(path) = &file {
        anyhow::ensure!(path.exists(), "database {} does not exist", path.display());
    }
    let ask = !opts.yes && std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let older_than = opts
        .older_than
        .as_deref()
        .unwrap_or("retention.events_max_age");
    let before = file.as_deref().map(database_bytes);
    let report = block_on(async {
        let store = backend
            .open()
            .await
            .with_context(|| format!("opening {}", backend.describe()))?;
        let outbox = store.clone().outbox_records();
        let records = store.run_records();
        if opts.dry_run || ask {
            let p = records.prune_preview(ended_before_ms).await?;
            let size = match before {
                Some(b) => format!("database {b} bytes (with its WAL)"),
                None => backend.describe(),
            };
            let line = format!(
                "the events of {} runs ({} events, {} payload bytes) ended more than \
                 {older_than} ago; {size}",
                p.runs, p.events, p.bytes,
            );
            if opts.dry_run {
                println!("would remove {line}; nothing changed (--dry-run)");
                return anyhow::Ok(None);
            }
            if p.runs == 0 {
                println!("nothing to prune: no terminal run with events ended that long ago");
                return Ok(None);
            }
            eprint!("remove {line}? [y/N] ");
            let _ = std::io::stderr().flush();
            let mut answer = String::new();
            std::io::stdin().lock().read_line(&mut answer)?;
            if !matches!(answer.trim(), "y" | "Y" | "yes") {
                anyhow::bail!("not pruned: the answer was not yes");
            }
        }
        let report =
            callbackd::api::retention::prune(&*records, age, config.retention.batch_runs).await?;
        // The webhooks' settled deliveries go by the same age (the daemon's worker does the
        // same hourly): a database pruned by hand keeps no outbox the runs no longer have.
        let deliveries = outbox.prune_deliveries(ended_before_ms).await?;
        Ok(Some((report, deliveries)))
    })??;
    let Some((report, deliveries)) = report else {
        return Ok(());
    };
    if deliveries > 0 {
        println!(
            "removed {deliveries} settled webhook deliveries created more than {older_than} ago"
        );
    }
    match (&file, before) {
        (Some(path), Some(before)) => {
            if let Err(e) = callbackd::store::sqlite::files::truncate_wal(path) {
                tracing::debug!(error = %e, "checkpoint after prune");
            }
            println!(
                "pruned the events of {} runs ({} events); database {} bytes -> {} bytes \
                 (file and WAL)",
                report.runs,
                report.events,
                before,
                database_bytes(path)
            );
        }
        _ => println!(
            "pruned the events of {} runs ({} events) in {}",
            report.runs,
            report.events,
            backend.describe()
        ),
    }
    Ok(())
}
