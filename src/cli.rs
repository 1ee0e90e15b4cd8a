//! The command line (clap derive). `serve` is the default command.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "callbackd",
    version,
    about = "Store and custom-tool callback daemon for the Cursor SDK bridge"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Options of the default `serve` command.
    #[command(flatten)]
    pub serve: ConfigArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon (the default).
    Serve(ConfigArgs),
    /// Print the flags that point the bridge at this daemon.
    BridgeArgs {
        #[command(flatten)]
        config: ConfigArgs,
        #[arg(long, value_enum, default_value_t = ArgsFormat::Argv)]
        format: ArgsFormat,
    },
    /// Load and validate the configuration, print a summary, and exit.
    CheckConfig(ConfigArgs),
    /// Create or upgrade the database schema, and exit.
    Migrate(ConfigArgs),
    /// Verify the database offline: SQLite's integrity check and every checkpoint blob's
    /// checksum. Exits non-zero when anything is wrong.
    Check(ConfigArgs),
    /// Print the commented example configuration.
    PrintConfig,
}

/// Where the configuration comes from, with command-line overrides.
#[derive(Debug, Args, Clone, Default)]
pub struct ConfigArgs {
    /// TOML configuration file.
    #[arg(long, env = "CALLBACKD_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    /// Listen address, ADDR:PORT (overrides server.listen).
    #[arg(long, global = true)]
    pub listen: Option<String>,
    /// SQLite database file (overrides store.path).
    #[arg(long, global = true)]
    pub db: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ArgsFormat {
    /// Shell-quoted command-line flags, to append to the bridge's command.
    Argv,
    /// `export` lines of the bridge's environment variables.
    Env,
    /// A JSON object, for programs.
    Json,
}
