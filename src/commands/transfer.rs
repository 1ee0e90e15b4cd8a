//! `callbackd backup`, `export` and `import`: a store to and from files (see `transfer`).

use callbackd::cli::{BackupArgs, ExportArgs, ImportArgs};

use super::{block_on, load, sqlite_only};

/// `callbackd backup`: a consistent copy of the SQLite file.
pub fn backup(args: &BackupArgs) -> anyhow::Result<()> {
    let config = load(&args.config)?;
    sqlite_only(&config, "backup")?;
    callbackd::transfer::backup::command(
        &config.store.path,
        &args.path,
        args.force,
        args.namespace.as_ref(),
    )
}

/// `callbackd export`: a namespace in the bridge's JSONL layout.
pub fn export(args: &ExportArgs) -> anyhow::Result<()> {
    let config = load(&args.config)?;
    block_on(callbackd::transfer::jsonl_export::command(
        &config.store.backend(),
        &args.namespace,
        &args.dir,
    ))?
}

/// `callbackd import`: a namespace from the bridge's JSONL layout.
pub fn import(args: &ImportArgs) -> anyhow::Result<()> {
    let config = load(&args.config)?;
    sqlite_only(&config, "import")?;
    callbackd::transfer::jsonl_import::command(
        &config.store.sqlite_options(),
        &args.namespace,
        &args.dir,
        args.replace,
    )
}
