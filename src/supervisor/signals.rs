//! The signals `run` catches and forwards to the bridge, installed before anything is spawned.
//! SIGHUP is caught too but not forwarded: it reloads callbackd's namespaces and tokens
//! (`app::reload`, which listens for it itself), as for `callbackd serve`.

use anyhow::Context;
use nix::sys::signal::Signal;
use tokio::signal::unix::{signal, SignalKind};
use tokio::time::Instant;

/// The signals callbackd forwards to the bridge.
pub(super) struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    /// Held so that SIGHUP never takes its default action (ending callbackd) here.
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    pub(super) fn install() -> anyhow::Result<Self> {
        let listen = |kind: SignalKind, name: &str| {
            signal(kind).with_context(|| format!("cannot listen for {name}"))
        };
        Ok(Signals {
            int: listen(SignalKind::interrupt(), "SIGINT")?,
            term: listen(SignalKind::terminate(), "SIGTERM")?,
            hup: listen(SignalKind::hangup(), "SIGHUP")?,
        })
    }

    /// The next signal to forward (SIGHUP is the reload's, never returned).
    pub(super) async fn recv(&mut self) -> Signal {
        loop {
            tokio::select! {
                _ = self.int.recv() => return Signal::SIGINT,
                _ = self.term.recv() => return Signal::SIGTERM,
                _ = self.hup.recv() => tracing::debug!("SIGHUP is not forwarded to the bridge: callbackd reloads"),
            }
        }
    }

    /// A signal that has already arrived, if any.
    pub(super) fn pending(&mut self) -> Option<Signal> {
        use futures_util::FutureExt;
        self.recv().now_or_never()
    }
}

/// Sleeps until `at`, or forever.
pub(super) async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
