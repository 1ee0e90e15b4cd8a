//! When the bridge counts as started: its ready line was printed, it answered a `Ping`, and
//! the run API is attached to it. Only then does `callbackd run` print its own ready line and
//! write the ready file; a bridge that dies before that is a failed start, reported with its
//! last stderr lines.

use std::time::Duration;

use crate::bridge::{BridgeClient, BridgeSlot};

use super::child::Bridge;
use super::BridgeExit;

/// How long the bridge has to answer its first Ping after its ready line.
const PING_DEADLINE: Duration = Duration::from_secs(10);
const PING_RETRY: Duration = Duration::from_millis(100);

/// Builds the run API's client from the bridge's ready JSON, waits for its Ping, attaches it.
pub(super) async fn attach(
    ready_json: &str,
    slot: &BridgeSlot,
    model: String,
    api_key: String,
    bridge: &mut Bridge,
) -> Result<(), String> {
    let ready: serde_json::Value = serde_json::from_str(ready_json)
        .map_err(|e| format!("the bridge's ready line is not JSON: {e}"))?;
    let client = BridgeClient::from_ready(&ready, model, api_key)?;
    let deadline = tokio::time::Instant::now() + PING_DEADLINE;
    loop {
        match client.ping().await {
            Ok(()) => break,
            Err(e) => {
                if let Ok(Some(status)) = bridge.child.try_wait() {
                    return Err(format!(
                        "the bridge exited ({status}) before it answered a Ping: {e}"
                    ));
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(format!(
                        "the bridge at {} did not answer a Ping within {PING_DEADLINE:?}: {e}",
                        client.url()
                    ));
                }
                tokio::time::sleep(PING_RETRY).await;
            }
        }
    }
    slot.attach(client);
    Ok(())
}

/// `callbackd run` failed because its bridge never became ready: why, and the bridge's last
/// stderr lines (already relayed, repeated here so the error stands on its own).
#[derive(Debug)]
pub struct NotReady {
    why: String,
    exit: BridgeExit,
    last_lines: Vec<String>,
}

impl NotReady {
    pub(super) fn new(why: String, exit: BridgeExit, last_lines: Vec<String>) -> NotReady {
        NotReady {
            why,
            exit,
            last_lines,
        }
    }

    /// callbackd's exit status: the bridge's, or 1 where that would read as success.
    pub fn exit_code(&self) -> u8 {
        match self.exit.exit_code() {
            0 => 1,
            code => code,
        }
    }
}

impl std::fmt::Display for NotReady {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the bridge did not start: {}", self.why)?;
        if self.last_lines.is_empty() {
            write!(f, " (it printed nothing on stderr)")
        } else {
            write!(f, "; its last stderr lines:")?;
            for line in &self.last_lines {
                write!(f, "\n  {line}")?;
            }
            Ok(())
        }
    }
}

impl std::error::Error for NotReady {}
