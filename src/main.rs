//! The `callbackd` binary: parse the command line, run the command (`commands/`), turn an
//! error into a message and an exit code.

mod commands;

use clap::Parser;

use callbackd::cli::Cli;
use callbackd::telemetry;

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match commands::run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // `callbackd run`: the bridge's own stderr already said why it stopped.
            if let Some(exit) = e.downcast_ref::<callbackd::supervisor::BridgeExit>() {
                return std::process::ExitCode::from(exit.exit_code());
            }
            let e = callbackd::error_chain::Chain(&e);
            telemetry::stderr_line(format_args!("callbackd: error: {e}"));
            std::process::ExitCode::FAILURE
        }
    }
}
