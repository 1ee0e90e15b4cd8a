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
//! The preview reads SQLite directly (read-only); on PostgreSQL it is not offered yet.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use rusqlite::{params, Connection, OpenFlags};

use callbackd::cli::ConfigArgs;

use super::{block_on, load};

/// Statuses whose runs never append again (as the store's own prune).
const TERMINAL: &str = "('finished','error','cancelled','expired')";

/// What a prune would remove.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Preview {
    pub runs: u64,
    pub events: u64,
    /// The events' payload bytes (the space the rows take is somewhat more).
    pub bytes: u64,
}

/// The size of a SQLite database on disk: its file and its `-wal`, where recent writes are
/// until a checkpoint (the main file alone can read 4096 bytes while megabytes sit in the WAL).
pub fn database_bytes(db: &Path) -> u64 {
    let len = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    len(db) + len(&callbackd::store::sqlite::files::wal_path(db))
}

/// What `prune` would remove from the SQLite database at `db`: terminal runs that ended
/// before `ended_before_ms` and still have events.
pub fn preview(db: &Path, ended_before_ms: i64) -> rusqlite::Result<Preview> {
    let conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.query_row(
        &format!(
            "SELECT count(DISTINCT r.ns || char(0) || r.run_id), count(e.seq), \
                    coalesce(sum(length(CAST(e.payload AS BLOB))), 0) \
             FROM runs r JOIN run_events e ON e.ns = r.ns AND e.run_id = r.run_id \
             WHERE json_extract(r.doc, '$.status') IN {TERMINAL} \
               AND coalesce(json_extract(r.doc, '$.endedAt'), json_extract(r.doc, '$.updatedAt')) < ?1"
        ),
        params![ended_before_ms],
        |r| {
            Ok(Preview {
                runs: r.get::<_, i64>(0)?.try_into().unwrap_or(0),
                events: r.get::<_, i64>(1)?.try_into().unwrap_or(0),
                bytes: r.get::<_, i64>(2)?.try_into().unwrap_or(0),
            })
        },
    )
}

/// Folds the WAL into the database file and truncates both (a no-op while another
/// connection still reads old pages; the daemon's own checkpoints finish the job then).
fn checkpoint(db: &Path) -> rusqlite::Result<()> {
    let conn = Connection::open(db)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
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
    if opts.dry_run || ask {
        let Some(path) = &file else {
            anyhow::bail!(
                "{} on {}: the preview reads SQLite only; run with --yes to prune",
                if opts.dry_run {
                    "--dry-run"
                } else {
                    "the confirmation"
                },
                backend.describe()
            );
        };
        let p = preview(path, ended_before_ms)
            .with_context(|| format!("reading {}", path.display()))?;
        let line = format!(
            "the events of {} runs ({} events, {} payload bytes) ended more than {} ago; \
             database {} bytes (with its WAL)",
            p.runs,
            p.events,
            p.bytes,
            opts.older_than
                .as_deref()
                .unwrap_or("retention.events_max_age"),
            database_bytes(path)
        );
        if opts.dry_run {
            println!("would remove {line}; nothing changed (--dry-run)");
            return Ok(());
        }
        if p.runs == 0 {
            println!("nothing to prune: no terminal run with events ended that long ago");
            return Ok(());
        }
        eprint!("remove {line}? [y/N] ");
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            anyhow::bail!("not pruned: the answer was not yes");
        }
    }
    let before = file.as_deref().map(database_bytes);
    let report = block_on(async {
        let store = backend
            .open()
            .await
            .with_context(|| format!("opening {}", backend.describe()))?;
        let records = store.run_records();
        let report =
            callbackd::api::retention::prune(&*records, age, config.retention.batch_runs).await?;
        anyhow::Ok(report)
    })??;
    match (&file, before) {
        (Some(path), Some(before)) => {
            if let Err(e) = checkpoint(path) {
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
