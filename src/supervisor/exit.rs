//! How the bridge ended, and the exit status callbackd passes on for it.

use std::fmt;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use nix::sys::signal::Signal;

/// How the bridge ended; an error when it is not a success, so `main` can exit with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BridgeExit {
    /// It exited with this status.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
    /// A stop signal callbackd forwarded ended it, and the rest of its process group was gone
    /// within the stop timeout, without SIGKILL: a clean stop on request. It is how the wheel's
    /// `bin/cursor-sdk-bridge` ends on one, as `sh` does not handle SIGTERM (node, its child,
    /// shuts down as it should); reporting it as 143 would look like a crash to a supervisor.
    Stopped(i32),
}

impl BridgeExit {
    pub fn from_status(status: ExitStatus) -> Self {
        match (status.code(), status.signal()) {
            (Some(code), _) => BridgeExit::Code(code),
            (None, Some(sig)) => BridgeExit::Signal(sig),
            (None, None) => BridgeExit::Code(1),
        }
    }

    pub fn success(self) -> bool {
        matches!(self, BridgeExit::Code(0) | BridgeExit::Stopped(_))
    }

    /// callbackd's own exit status: the bridge's, or 128 + the signal number, as shells do.
    pub fn exit_code(self) -> u8 {
        let code = match self {
            BridgeExit::Code(code) => code,
            BridgeExit::Signal(sig) => 128 + sig,
            BridgeExit::Stopped(_) => 0,
        };
        u8::try_from(code).unwrap_or(u8::MAX)
    }

    /// `Ok` for a success, else this exit as the error.
    pub fn into_result(self) -> Result<(), BridgeExit> {
        if self.success() {
            Ok(())
        } else {
            Err(self)
        }
    }
}

impl fmt::Display for BridgeExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BridgeExit::Code(code) => write!(f, "the bridge exited with status {code}"),
            BridgeExit::Signal(sig) => match Signal::try_from(sig) {
                Ok(s) => write!(f, "the bridge was killed by {}", s.as_str()),
                Err(_) => write!(f, "the bridge was killed by signal {sig}"),
            },
            BridgeExit::Stopped(sig) => match Signal::try_from(sig) {
                Ok(s) => write!(f, "the bridge stopped on the {} it was sent", s.as_str()),
                Err(_) => write!(f, "the bridge stopped on the signal {sig} it was sent"),
            },
        }
    }
}

impl std::error::Error for BridgeExit {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_shell_convention() {
        assert_eq!(BridgeExit::Code(0).exit_code(), 0);
        assert!(BridgeExit::Code(0).into_result().is_ok());
        assert_eq!(BridgeExit::Code(3).exit_code(), 3);
        assert_eq!(BridgeExit::Signal(15).exit_code(), 143);
        assert_eq!(BridgeExit::Stopped(15).exit_code(), 0);
        assert!(BridgeExit::Stopped(15).into_result().is_ok());
        assert_eq!(
            BridgeExit::Signal(15).to_string(),
            "the bridge was killed by SIGTERM"
        );
        assert_eq!(
            BridgeExit::from_status(ExitStatus::from_raw(9)),
            BridgeExit::Signal(9)
        );
        assert_eq!(
            BridgeExit::from_status(ExitStatus::from_raw(2 << 8)),
            BridgeExit::Code(2)
        );
    }
}
