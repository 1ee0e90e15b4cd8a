//! `callbackd run -- <bridge>`: the daemon with the bridge as its child (see the
//! `supervisor` module).

use anyhow::Context;

use callbackd::{telemetry, App};

use super::{load, reload_source};

pub fn run(args: callbackd::cli::RunArgs) -> anyhow::Result<()> {
    use callbackd::supervisor::{self, BridgeCommand, RunOptions};
    // Refused before anything starts: the bridge command must not carry our flags.
    let bridge = BridgeCommand::new(args.bridge)?;
    let mut config = load(&args.config)?;
    if !supervisor::user_chose_listen(args.config.config.as_deref(), args.config.listen.as_deref())
    {
        config.server.listen = supervisor::FREE_PORT_LISTEN.into();
    }
    telemetry::init(&config.log);
    let source = reload_source(&args.config);
    let opts = RunOptions {
        namespace: args.namespace,
        ready_file: args.ready_file,
        stop_timeout: std::time::Duration::from_secs(args.stop_timeout),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let exit = runtime.block_on(supervisor::run(
        App::builder(config).reload_from(source),
        bridge,
        opts,
    ))?;
    Ok(exit.into_result()?)
}
