//! The command-line arguments of `backup`, `export` and `import`.

use std::path::PathBuf;

use clap::Args;

use crate::cli::ConfigArgs;

/// `callbackd backup [--force] PATH`
#[derive(Debug, Args, Clone)]
pub struct BackupArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Replace PATH if it exists.
    #[arg(long)]
    pub force: bool,
    /// Where to write the copy (a new SQLite file).
    pub path: PathBuf,
}

/// `callbackd export DIR`
#[derive(Debug, Args, Clone)]
pub struct ExportArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// A new or empty directory; gets agents.ndjson, runs.ndjson, run_events.ndjson and
    /// checkpoints.ndjson.
    pub dir: PathBuf,
}

/// `callbackd import [--replace] DIR`
#[derive(Debug, Args, Clone)]
pub struct ImportArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Overwrite agents, runs (with their events) and checkpoint blobs that already exist,
    /// instead of refusing the import.
    #[arg(long)]
    pub replace: bool,
    /// A bridge JSONL store directory (its `rootDir`).
    pub dir: PathBuf,
}
