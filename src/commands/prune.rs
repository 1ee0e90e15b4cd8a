//! `callbackd prune`: removes the events of runs that ended long enough ago.

use anyhow::Context;

use callbackd::cli::ConfigArgs;

use super::{block_on, load};

pub fn run(config: &ConfigArgs, older_than: Option<&str>) -> anyhow::Result<()> {
    let config = load(config)?;
    let age = match older_than {
        Some(s) => callbackd::config::parse_duration(s)
            .map_err(|e| anyhow::anyhow!("--older-than {s:?}: {e}"))?,
        None => config.retention.max_age()?.context(
            "nothing to prune by: give --older-than DURATION or set \
             retention.events_max_age",
        )?,
    };
    let backend = config.store.backend();
    // The file's size before and after, for SQLite (PostgreSQL reuses the space).
    let file = backend.sqlite_path().map(std::path::Path::to_path_buf);
    if let Some(path) = &file {
        anyhow::ensure!(path.exists(), "database {} does not exist", path.display());
    }
    let size = || {
        file.as_ref()
            .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
    };
    let before = size();
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
    match (before, size()) {
        (Some(before), Some(after)) => println!(
            "pruned the events of {} runs ({} events); database {} bytes -> {} bytes",
            report.runs, report.events, before, after
        ),
        _ => println!(
            "pruned the events of {} runs ({} events) in {}",
            report.runs,
            report.events,
            backend.describe()
        ),
    }
    Ok(())
}
