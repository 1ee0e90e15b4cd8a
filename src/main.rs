//! The `callbackd` binary: parse the command line, run the command (`commands/`), turn an
//! error into a message and an exit code.

mod commands;

use clap::Parser;

use callbackd::cli::Cli;
use callbackd::telemetry;

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    commands::closed_stdout::install_panic_hook();
    match commands::run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) if commands::closed_stdout::is_closed_stdout(&e) => {
            std::process::ExitCode::from(commands::closed_stdout::EXIT_STATUS)
        }
        Err(e) => {
            // `callbackd run`: the bridge's own stderr already said why it stopped.
            if let Some(exit) = e.downcast_ref::<callbackd::supervisor::BridgeExit>() {
                return std::process::ExitCode::from(exit.exit_code());
            }
            if let Some(failed) = e.downcast_ref::<callbackd::supervisor::NotReady>() {
                telemetry::stderr_line(format_args!("callbackd: error: {failed}"));
                return std::process::ExitCode::from(failed.exit_code());
            }
            let e = callbackd::error_chain::Chain(&e);
            telemetry::stderr_line(format_args!("callbackd: error: {e}"));
            std::process::ExitCode::FAILURE
        }
    }
}
