//! One file per command (as mdBook's `src/cmd/`); [`run`] picks the one the command line
//! names. The helpers here are what several commands share: the configuration as loaded
//! and overridden by flags, and a runtime for a store command's future.

mod bridge_args;
mod check;
mod check_config;
pub mod closed_stdout;
mod copy_store;
mod healthcheck;
mod manual;
mod migrate;
mod namespaces;
mod prune;
mod run;
mod serve;
mod tools;
mod transfer;

use anyhow::Context;

use callbackd::cli::{Cli, Command, ConfigArgs, ToolsCommand};
use callbackd::config::Config;

/// Runs the command `cli` names (`serve` when none).
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command.unwrap_or(Command::Serve(cli.serve)) {
        Command::Serve(args) => serve::run(&args),
        Command::Run(args) => run::run(args),
        Command::BridgeArgs {
            config,
            format,
            namespace,
        } => bridge_args::run(&config, format, &namespace),
        Command::CheckConfig(args) => check_config::run(&args),
        Command::Check(args) => check::run(&args),
        Command::Migrate(args) => migrate::run(&args),
        Command::Prune {
            config,
            older_than,
            dry_run,
            yes,
        } => prune::run(
            &config,
            &prune::PruneOptions {
                older_than,
                dry_run,
                yes,
            },
        ),
        Command::Namespaces { config, json } => namespaces::run(&config, json),
        Command::Backup(args) => transfer::backup(&args),
        Command::Export(args) => transfer::export(&args),
        Command::Import(args) => transfer::import(&args),
        Command::CopyStore(args) => block_on(copy_store::run(args))?,
        Command::PrintConfig => {
            print!("{}", callbackd::config::reference());
            Ok(())
        }
        Command::Healthcheck(args) => healthcheck::run(&args),
        Command::Watchdog {
            pgid,
            stop_timeout_ms,
        } => callbackd::supervisor::watchdog::watch(
            pgid,
            std::time::Duration::from_millis(stop_timeout_ms),
        ),
        Command::Follow(args) => callbackd::client::commands::follow_command(&args),
        Command::Sessions(args) => callbackd::client::commands::sessions_command(&args),
        Command::Runs(args) => callbackd::client::commands::runs_command(&args),
        Command::Approvals(args) => callbackd::client::commands::approvals_command(&args),
        Command::Webhooks(args) => callbackd::client::webhooks::webhooks_command(&args),
        Command::Approve(args) => callbackd::client::commands::decide_command(&args, true),
        Command::Deny(args) => callbackd::client::commands::decide_command(&args, false),
        Command::Answer(args) => callbackd::client::commands::answer_command(&args),
        Command::Fork(args) => callbackd::client::fork::fork_command(&args),
        Command::Completions { shell } => {
            Ok(manual::completions(shell, &mut std::io::stdout().lock())?)
        }
        Command::Man => Ok(manual::man_page(&mut std::io::stdout().lock())?),
        Command::Tools {
            command: ToolsCommand::Export(args),
        } => tools::export(&args),
    }
}

/// `backup` and `import` work on a SQLite file; on PostgreSQL they would silently read or
/// write a file nobody uses. (`export` reads either backend.)
pub fn sqlite_only(config: &Config, command: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        config.store.backend().sqlite_path().is_some(),
        "`callbackd {command}` works on a SQLite database, and the store is {}; use \
         PostgreSQL's own tools (pg_dump) or `callbackd copy-store` to a SQLite file",
        config.store.backend().describe()
    );
    Ok(())
}

/// Runs a store command's future on a runtime of its own.
pub fn block_on<T>(fut: impl std::future::Future<Output = T>) -> anyhow::Result<T> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    Ok(runtime.block_on(fut))
}

/// A config value the way it is written in TOML (`"normal"`, not Rust's `Normal`).
pub fn as_toml(value: &impl serde::Serialize) -> String {
    toml::Value::try_from(value).map_or_else(|e| format!("<{e}>"), |v| v.to_string())
}

/// Configuration from file and environment, with the command-line overrides, validated.
pub fn load(args: &ConfigArgs) -> anyhow::Result<Config> {
    args.load()
}

/// A reload reads the configuration as `load` does now, from the same file and flags.
pub fn reload_source(args: &ConfigArgs) -> callbackd::app::reload::ReloadSource {
    let args = args.clone();
    callbackd::app::reload::ReloadSource {
        file: args.config.clone(),
        load: std::sync::Arc::new(move || load(&args)),
    }
}
