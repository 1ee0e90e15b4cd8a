//! `callbackd check`: the store's integrity and its checkpoint blobs.

use callbackd::cli::ConfigArgs;

use super::{block_on, load};

pub fn run(args: &ConfigArgs) -> anyhow::Result<()> {
    let config = load(args)?;
    let backend = config.store.backend();
    let report = block_on(backend.check())??;
    println!(
        "{} (schema version {})",
        backend.describe(),
        report.schema_version
    );
    for line in &report.integrity_errors {
        println!("integrity: {line}");
    }
    for (ns, agent, blob) in &report.corrupt_blobs {
        println!(
            "corrupt checkpoint blob {blob} of agent {agent} (namespace {ns}): checksum mismatch"
        );
    }
    println!(
        "integrity_check: {}; checkpoint blobs: {} checked, {} corrupt",
        if report.integrity_errors.is_empty() {
            "ok"
        } else {
            "FAILED"
        },
        report.blobs_checked,
        report.corrupt_blobs.len()
    );
    anyhow::ensure!(report.is_ok(), "the database has problems (see above)");
    Ok(())
}
