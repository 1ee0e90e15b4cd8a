//! The signals `run` catches and forwards to the bridge, installed before anything is spawned.

use anyhow::Context;
use nix::sys::signal::Signal;
use tokio::signal::unix::{signal, SignalKind};
use tokio::time::Instant;

/// The signals callbackd forwards to the bridge.
pub(super) struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
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

    pub(super) async fn recv(&mut self) -> Signal {
        tokio::select! {
            _ = self.int.recv() => Signal::SIGINT,
            _ = self.term.recv() => Signal::SIGTERM,
            _ = self.hup.recv() => Signal::SIGHUP,
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
