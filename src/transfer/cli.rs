//! The command-line arguments of `backup`, `export` and `import`.

use std::path::PathBuf;

use clap::Args;

use crate::cli::ConfigArgs;
use crate::store::Namespace;

/// `callbackd backup [--force] [--namespace NAME] PATH`
#[derive(Debug, Args, Clone)]
pub struct BackupArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Replace PATH if it exists.
    #[arg(long)]
    pub force: bool,
    /// Keep only this namespace's rows in the copy (agents, runs, events, checkpoints, memory
    /// notes, tool calls, approvals, ...). Without it the copy is the whole database: every
    /// namespace.
    #[arg(long, value_name = "NAME", value_parser = Namespace::parse)]
    pub namespace: Option<Namespace>,
    /// Where to write the copy (a new SQLite file).
    pub path: PathBuf,
}

/// `callbackd export [--namespace NAME] DIR`
#[derive(Debug, Args, Clone)]
pub struct ExportArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The namespace to export.
    #[arg(long, value_name = "NAME", default_value = "default", value_parser = Namespace::parse)]
    pub namespace: Namespace,
    /// A new or empty directory; gets agents.ndjson, runs.ndjson, run_events.ndjson and
    /// checkpoints.ndjson.
    pub dir: PathBuf,
}

/// `callbackd import [--replace] [--namespace NAME] DIR`
#[derive(Debug, Args, Clone)]
pub struct ImportArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Overwrite agents, runs (with their events) and checkpoint blobs that already exist
    /// in the namespace, instead of refusing the import.
    #[arg(long)]
    pub replace: bool,
    /// The namespace to import into; other namespaces are not touched.
    #[arg(long, value_name = "NAME", default_value = "default", value_parser = Namespace::parse)]
    pub namespace: Namespace,
    /// A bridge JSONL store directory (its `rootDir`).
    pub dir: PathBuf,
}
