//! `callbackd namespaces`: what each namespace holds.

use anyhow::Context;

use callbackd::cli::ConfigArgs;

use super::{block_on, load};

pub fn run(config: &ConfigArgs, json: bool) -> anyhow::Result<()> {
    let config = load(config)?;
    let backend = config.store.backend();
    if let Some(path) = backend.sqlite_path() {
        anyhow::ensure!(path.exists(), "database {} does not exist", path.display());
    }
    // Tokens are not needed to read usage.
    let table = callbackd::namespaces::Table::without_default_tokens(&config)?;
    let rows = block_on(async {
        let store = backend
            .open()
            .await
            .with_context(|| format!("opening {}", backend.describe()))?;
        let records = store.run_records();
        anyhow::Ok(callbackd::namespaces::usage::rows(&*records, &table).await?)
    })??;
    if json {
        for row in &rows {
            println!("{}", serde_json::to_string(row)?);
        }
    } else {
        print!("{}", callbackd::namespaces::usage::render(&rows));
        if let Some(path) = backend.sqlite_path() {
            let bytes = super::prune::database_bytes(path);
            println!("database {}: {bytes} bytes (file and WAL)", path.display());
        }
    }
    Ok(())
}
