//! The HTTP/1.1 accept loop.
//!
//! Our own loop rather than `axum::serve`, for three things a daemon next to the bridge
//! needs: `TCP_NODELAY` on every connection (otherwise a response written as head and body
//! waits ~40 ms for a delayed ACK), a cap on open connections and a header read timeout (so
//! slow or idle clients cannot pin the daemon), and a bounded graceful drain on shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Connection-level limits.
#[derive(Debug, Clone, Copy)]
pub struct ServerLimits {
    /// Open connections at most; further clients wait in the listen backlog.
    pub max_connections: usize,
    /// Time a client has to send a complete request head, counted from the connection's
    /// start or the end of the previous response (so it also closes idle keep-alive
    /// connections; keep it above the bridge's own idle-socket timeout of ~5 s).
    pub header_read_timeout: Duration,
    /// How long in-flight requests may take to finish once shutdown begins.
    pub shutdown_grace: Duration,
}

/// Serves `router` on `listener` until `shutdown` resolves, then stops accepting, lets
/// in-flight requests finish (up to `shutdown_grace`) and returns.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ServerLimits,
    shutdown: impl Future<Output = ()>,
) {
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = slots.clone().acquire_owned() => permit.expect("semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, %peer, "cannot set TCP_NODELAY");
        }
        let service = TowerToHyperService::new(router.clone());
        let conn = builder.serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, %peer, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(limits.shutdown_grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            grace_ms = limits.shutdown_grace.as_millis() as u64,
            "in-flight requests did not finish within the shutdown grace period"
        );
    }
}
