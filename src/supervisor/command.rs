//! The bridge's command line: the user's command, checked for the flags `run` owns, and
//! spawned with those flags appended, in its own process group, with a scrubbed environment.

use std::ffi::{OsStr, OsString};
use std::process::Stdio;

use tokio::process::Child;

use super::SupervisorError;
use crate::bridge::BridgeArgs;
use crate::config;

/// The bridge flags `run` sets itself; a bridge command that already has one is refused.
pub const OWNED_FLAGS: [&str; 5] = [
    "--local-store",
    "--store-callback-url",
    "--store-callback-auth-token",
    "--tool-callback-url",
    "--tool-callback-auth-token",
];

/// Variables removed from the bridge's environment: callbackd's own tokens, and the bridge's
/// callback settings (the flags override them anyway, and tokens in them would be readable by
/// every command an agent runs).
pub const SCRUBBED_ENV: [&str; 9] = [
    config::env::STORE_TOKEN,
    config::env::TOOL_TOKEN,
    "CURSOR_SDK_LOCAL_STORE",
    "CURSOR_SDK_STORE_CALLBACK_URL",
    "CURSOR_SDK_STORE_CALLBACK_AUTH_TOKEN",
    "CURSOR_SDK_STORE_CALLBACK_TOKEN",
    "CURSOR_SDK_TOOL_CALLBACK_URL",
    "CURSOR_SDK_TOOL_CALLBACK_AUTH_TOKEN",
    "CURSOR_SDK_TOOL_CALLBACK_TOKEN",
];

/// The bridge's command line as the user gave it, checked for flags `run` owns.
#[derive(Debug, Clone)]
pub struct BridgeCommand {
    program: OsString,
    args: Vec<OsString>,
}

impl BridgeCommand {
    /// Checks a command line (program first). `--flag value` and `--flag=value` both count
    /// as the flag being present.
    pub fn new(argv: Vec<OsString>) -> Result<Self, SupervisorError> {
        let mut argv = argv.into_iter();
        let program = argv.next().ok_or(SupervisorError::NoCommand)?;
        let args: Vec<OsString> = argv.collect();
        for arg in &args {
            if let Some(flag) = owned_flag(arg) {
                return Err(SupervisorError::FlagConflict { flag: flag.into() });
            }
        }
        Ok(BridgeCommand { program, args })
    }

    pub fn program(&self) -> &OsStr {
        &self.program
    }
}

fn owned_flag(arg: &OsStr) -> Option<&'static str> {
    let arg = arg.as_encoded_bytes();
    OWNED_FLAGS.into_iter().find(|flag| {
        arg.strip_prefix(flag.as_bytes())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(b"="))
    })
}

pub(super) fn spawn(bridge: &BridgeCommand, flags: &BridgeArgs) -> Result<Child, SupervisorError> {
    let mut cmd = tokio::process::Command::new(&bridge.program);
    cmd.args(&bridge.args)
        .args(flags.argv())
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        // Its own group: a signal for the bridge reaches the sh wrapper and node alike.
        .process_group(0);
    for var in SCRUBBED_ENV {
        cmd.env_remove(var);
    }
    let child = cmd.spawn().map_err(|source| SupervisorError::Spawn {
        program: bridge.program.to_string_lossy().into_owned(),
        source,
    })?;
    tracing::info!(pid = child.id(), "bridge started");
    Ok(child)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(args: &[&str]) -> Result<BridgeCommand, SupervisorError> {
        BridgeCommand::new(args.iter().map(OsString::from).collect())
    }

    #[test]
    fn owned_flags_are_refused_in_both_forms() {
        for flag in OWNED_FLAGS {
            let err = cmd(&["node", "bridge.js", flag, "x"]).unwrap_err();
            assert!(err.to_string().contains(flag), "{err}");
            let eq = format!("{flag}=x");
            assert!(cmd(&["node", &eq]).is_err());
        }
        let ok = cmd(&["node", "bridge.js", "--local-stores", "--port", "0"]).unwrap();
        assert_eq!(ok.program(), "node");
        assert!(matches!(cmd(&[]), Err(SupervisorError::NoCommand)));
    }

    #[test]
    fn the_program_itself_is_not_checked() {
        assert!(cmd(&["--local-store"]).is_ok());
    }
}
