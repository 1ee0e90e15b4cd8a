//! `[server]`: where the daemon listens and how it treats connections.

use std::net::SocketAddr;

use schemars::JsonSchema;
use serde::Deserialize;

use super::ConfigError;

/// Default listen address: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7420";

/// Upper bound of `server.threads`.
const MAX_SERVER_THREADS: usize = 1024;

/// `[server]`: where the daemon listens and how it treats connections.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// `ADDR:PORT` to listen on. Port 0 picks a free port.
    pub listen: String,
    /// Must be set to listen on a non-loopback address: the callbacks carry agent state.
    pub allow_remote: bool,
    /// Largest request body, as sent and after decompression.
    pub max_body_bytes: usize,
    /// Open connections at most; further clients wait in the listen backlog.
    pub max_connections: usize,
    /// Time a client has to send a request head (also closes idle keep-alive connections).
    pub header_read_timeout_ms: u64,
    /// Time a client has to send a request body once its head arrived.
    pub body_read_timeout_ms: u64,
    /// On SIGTERM/SIGINT, how long in-flight calls may take to finish.
    pub shutdown_grace_ms: u64,
    /// Threads that serve connections; 0: one per CPU.
    pub threads: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: DEFAULT_LISTEN.into(),
            allow_remote: false,
            max_body_bytes: 32 * 1024 * 1024,
            max_connections: 512,
            header_read_timeout_ms: 20_000,
            body_read_timeout_ms: 30_000,
            shutdown_grace_ms: 10_000,
            threads: 0,
        }
    }
}

impl ServerConfig {
    pub fn listen_addr(&self) -> Result<SocketAddr, ConfigError> {
        self.listen.parse().map_err(|_| {
            ConfigError::Invalid(format!(
                "server.listen {:?} is not an ADDR:PORT socket address",
                self.listen
            ))
        })
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let addr = self.listen_addr()?;
        if !addr.ip().is_loopback() && !self.allow_remote {
            return Err(ConfigError::Invalid(format!(
                "server.listen {addr} is not a loopback address; set server.allow_remote = true \
                 (or CALLBACKD_ALLOW_REMOTE=true) to accept callbacks from other hosts"
            )));
        }
        if self.max_body_bytes < 1024 {
            return Err(ConfigError::Invalid(
                "server.max_body_bytes must be at least 1024".into(),
            ));
        }
        if self.max_connections == 0 {
            return Err(ConfigError::Invalid(
                "server.max_connections must be at least 1".into(),
            ));
        }
        if self.threads > MAX_SERVER_THREADS {
            return Err(ConfigError::Invalid(format!(
                "server.threads is {}; more than {MAX_SERVER_THREADS} connection threads is \
                 surely a mistake (0: one per CPU)",
                self.threads
            )));
        }
        Ok(())
    }
}
