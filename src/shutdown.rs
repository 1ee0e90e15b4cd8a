//! The shutdown signal: the first of SIGINT (Ctrl-C) and SIGTERM.

use std::future::Future;

use tokio::signal::unix::{signal, SignalKind};

/// Listens for SIGINT and SIGTERM from now on; the future resolves on the first.
///
/// Installed before the daemon announces itself: a signal is then caught from the moment a
/// supervisor may send it, even before the future is first polled (the listener keeps it).
/// A listener set up only when the future was first polled left a window after the ready
/// line in which a SIGTERM took its default action and killed the daemon unclean. SIGHUP is
/// caught from here on too (the reload listens for it once the daemon runs): a SIGHUP that
/// early is a reload of nothing, never the end of the daemon. Needs a tokio runtime.
pub fn install() -> std::io::Result<impl Future<Output = ()>> {
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let _hup = signal(SignalKind::hangup())?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => tracing::info!("SIGINT received, shutting down"),
            _ = term.recv() => tracing::info!("SIGTERM received, shutting down"),
        }
    })
}
