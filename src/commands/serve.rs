//! `callbackd serve` (the default command): the daemon, until a signal.

use anyhow::Context;

use callbackd::cli::ConfigArgs;
use callbackd::{telemetry, App};

use super::{load, reload_source};

pub fn run(args: &ConfigArgs) -> anyhow::Result<()> {
    let config = load(args)?;
    telemetry::init(&config.log);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let source = reload_source(args);
    runtime.block_on(async move {
        // Before the ready line: from then on a SIGTERM is a clean stop.
        let shutdown = callbackd::shutdown::install().context("listening for SIGINT/SIGTERM")?;
        let app = App::builder(config).reload_from(source).build().await?;
        let _runtime_file = callbackd::supervisor::ready_line::announce(&app, &Default::default());
        app.run_until(shutdown).await
    })
}
