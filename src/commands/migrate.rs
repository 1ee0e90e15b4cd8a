//! `callbackd migrate`: brings the store's schema up to date.

use anyhow::Context;

use callbackd::cli::ConfigArgs;

use super::{block_on, load};

pub fn run(args: &ConfigArgs) -> anyhow::Result<()> {
    let config = load(args)?;
    let backend = config.store.backend();
    let version = block_on(backend.migrate())?
        .with_context(|| format!("migrating {}", backend.describe()))?;
    println!("{} is at schema version {version}", backend.describe());
    Ok(())
}
