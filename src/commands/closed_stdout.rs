//! A closed stdout (`callbackd tools export | head -1`) ends a command quietly, with the
//! conventional status 141 (128 + SIGPIPE) a shell reports for a command killed by SIGPIPE,
//! rather than a panic's backtrace or an error line.
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe fails with `EPIPE`: `println!` panics
//! ("failed printing to stdout"), and `writeln!(out, ..)?` returns an `io::Error`. Restoring
//! SIGPIPE's default action would need `unsafe` (forbidden here) and would let a command
//! tool's closed stdin kill the daemon, so both cases are recognised instead: the panic by a
//! hook, the error where `main` reports errors ([`is_closed_stdout`]).

use std::io;

/// The exit status of a command whose reader went away.
pub const EXIT_STATUS: u8 = 141;

/// Makes a `println!` to a closed stdout exit with [`EXIT_STATUS`] and print nothing; every
/// other panic is reported as before.
pub fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if is_print_to_closed_stdout(message) {
            std::process::exit(i32::from(EXIT_STATUS));
        }
        default(info);
    }));
}

/// The message std's print macros panic with when stdout's reader is gone.
fn is_print_to_closed_stdout(message: &str) -> bool {
    let broken_pipe = io::Error::from(io::ErrorKind::BrokenPipe).to_string();
    message.starts_with("failed printing to stdout")
        && (message.contains(&broken_pipe)
            || message.contains(&format!("os error {}", nix::errno::Errno::EPIPE as i32)))
}

/// Whether a command failed only because stdout's reader went away: the error itself (not a
/// cause deeper in its chain, which could be a socket) is `EPIPE`.
pub fn is_closed_stdout(e: &anyhow::Error) -> bool {
    e.chain()
        .next()
        .and_then(|top| top.downcast_ref::<io::Error>())
        .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_print_to_a_closed_stdout_is_recognised() {
        let epipe = io::Error::from_raw_os_error(nix::errno::Errno::EPIPE as i32);
        assert!(is_print_to_closed_stdout(&format!(
            "failed printing to stdout: {epipe}"
        )));
        assert!(!is_print_to_closed_stdout(&format!(
            "failed printing to stderr: {epipe}"
        )));
        assert!(!is_print_to_closed_stdout("index out of bounds"));
    }

    #[test]
    fn a_broken_pipe_deeper_in_the_chain_is_still_reported() {
        let top = anyhow::Error::from(io::Error::from(io::ErrorKind::BrokenPipe));
        assert!(is_closed_stdout(&top));
        let deep = top.context("sending the request");
        assert!(!is_closed_stdout(&deep));
    }
}
