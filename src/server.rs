//! The HTTP/1.1 accept loop.
//!
//! Our own loop rather than `axum::serve`, for what a daemon next to the bridge needs:
//! `TCP_NODELAY` on every connection (otherwise a response written as head and body waits
//! ~40 ms for a delayed ACK), a cap on open connections and a header read timeout (so slow or
//! idle clients cannot pin the daemon), a bounded graceful drain on shutdown, and
//! connections served on [`ConnThreads`] rather than on tokio's work-stealing runtime.

use std::future::Future;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};

/// A connection's place under `server.max_connections`, in every request's extensions. A
/// run API stream gives it back ([`ConnSlot::release`]): streams have their own cap
/// (`api.max_streams`), so that long-lived readers never crowd out the bridge's callbacks.
/// A stream's response closes its connection afterwards, so the place is not reused.
#[derive(Clone)]
pub struct ConnSlot(Arc<std::sync::Mutex<Option<OwnedSemaphorePermit>>>);

impl ConnSlot {
    pub fn release(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

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
    /// Connection threads ([`ConnThreads`]); 0: one per CPU.
    pub threads: usize,
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
    let reserve = Arc::new(Semaphore::new(reserve_size(limits.max_connections)));
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    // A reserve connection must send its request head at once: a client holding a
    // half-sent request there is cut after RESERVE_HEADER_TIMEOUT, so the bridge (whose
    // heads go out whole) always gets in, even when such clients fill every other place.
    let mut reserve_builder = builder.clone();
    reserve_builder.header_read_timeout(RESERVE_HEADER_TIMEOUT.min(limits.header_read_timeout));
    tokio::pin!(shutdown);
    let threads = match ConnThreads::start(conn_thread_count(limits.threads)).await {
        Ok(threads) => Some(threads),
        Err(e) => {
            tracing::warn!(error = %e, "cannot start connection threads; serving on the main runtime");
            None
        }
    };
    loop {
        let (permit, reserved) = tokio::select! {
            biased;
            permit = slots.clone().acquire_owned() => (permit.expect("semaphore is never closed"), false),
            permit = reserve.clone().acquire_owned() => (permit.expect("semaphore is never closed"), true),
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
        let slot = ConnSlot(Arc::new(std::sync::Mutex::new(Some(permit))));
        let request_slot = slot.clone();
        let service = TowerToHyperService::new(tower::ServiceExt::map_request(
            router.clone(),
            move |mut req: http::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(request_slot.clone());
                req
            },
        ));
        let builder = if reserved {
            reserve_builder.clone()
        } else {
            builder.clone()
        };
        let watcher = graceful.watcher();
        let serve_one = move |stream: TcpStream| async move {
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            if let Err(e) = watcher.watch(conn).await {
                tracing::debug!(error = %e, %peer, "connection ended with an error");
            }
            slot.release();
        };
        match &threads {
            Some(threads) => threads.serve(stream, peer, serve_one),
            None => drop(tokio::spawn(serve_one(stream))),
        }
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
    drop(threads);
}

/// How long a connection in the reserve has to send its request head.
const RESERVE_HEADER_TIMEOUT: Duration = Duration::from_secs(1);

/// Connections past `server.max_connections` served with [`RESERVE_HEADER_TIMEOUT`]: an
/// eighth of the cap, at least 4.
fn reserve_size(max_connections: usize) -> usize {
    (max_connections / 8).max(4)
}

/// `configured`, or one connection thread per CPU.
fn conn_thread_count(configured: usize) -> usize {
    match configured {
        0 => std::thread::available_parallelism().map_or(2, NonZeroUsize::get),
        n => n,
    }
}

/// The threads that serve connections: each runs a single-threaded tokio runtime, and a
/// connection stays on the thread it was given (the one with the fewest open connections).
///
/// Why not tokio's multi-threaded runtime: its work stealing made every request of a lone
/// client wake a second worker that then found nothing to steal, a futex and an eventfd
/// wake-up per call on both sides; on this 2-core VM that was a quarter of the daemon's CPU
/// per call at one client. With connection-affine threads the CPU per call fell 20–30% at one
/// client and throughput rose 10–25% at 16–64 (BENCHMARKS.md). The cost is that a task that
/// blocks its thread stalls that thread's other connections. Store calls block only briefly
/// (SQLite in the page cache; contended writes wait for the writer thread without holding
/// the thread; the exception is the write connection's rare backstop checkpoint, see
/// `store::sqlite::wal`, which fsyncs inside the commit that triggers it). Custom tool calls,
/// whose code is not ours, run on the main runtime instead (`tool_calls`); the accept loop
/// shares that runtime, so tools that block every one of its workers delay new
/// connections, though not calls on open ones.
struct ConnThreads {
    threads: Vec<ConnThread>,
}

struct ConnThread {
    handle: tokio::runtime::Handle,
    open: Arc<AtomicUsize>,
    stop: Option<oneshot::Sender<()>>,
    join: Option<std::thread::JoinHandle<()>>,
}

/// How long a stopping connection thread waits for work it cannot cancel.
const CONN_THREAD_STOP: Duration = Duration::from_secs(1);

impl ConnThreads {
    /// Starts `n` threads. Each builds, runs and drops its runtime itself: a runtime dropped
    /// here, inside the caller's async context, would panic.
    async fn start(n: usize) -> std::io::Result<Self> {
        // Dropped on an early return: the threads started so far are stopped and joined.
        let mut started = ConnThreads {
            threads: Vec::with_capacity(n),
        };
        for i in 0..n.max(1) {
            let (ready, is_ready) = oneshot::channel::<std::io::Result<tokio::runtime::Handle>>();
            let (stop, stopped) = oneshot::channel::<()>();
            let join = std::thread::Builder::new()
                .name(format!("callbackd-conn-{i}"))
                .spawn(move || {
                    let runtime = match tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        Ok(runtime) => runtime,
                        Err(e) => {
                            let _ = ready.send(Err(e));
                            return;
                        }
                    };
                    let _ = ready.send(Ok(runtime.handle().clone()));
                    runtime.block_on(async {
                        let _ = stopped.await;
                    });
                    runtime.shutdown_timeout(CONN_THREAD_STOP);
                })?;
            let handle = match is_ready.await {
                Ok(Ok(handle)) => handle,
                Ok(Err(e)) => {
                    let _ = join.join();
                    return Err(e);
                }
                Err(_) => {
                    let _ = join.join();
                    return Err(std::io::Error::other("a connection thread ended at start"));
                }
            };
            started.threads.push(ConnThread {
                handle,
                open: Arc::new(AtomicUsize::new(0)),
                stop: Some(stop),
                join: Some(join),
            });
        }
        Ok(started)
    }

    /// Hands `stream` to the least busy thread, where `serve` runs with it.
    fn serve<F, Fut>(&self, stream: TcpStream, peer: SocketAddr, serve: F)
    where
        F: FnOnce(TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let thread = self
            .threads
            .iter()
            .min_by_key(|t| t.open.load(Ordering::Relaxed))
            .expect("at least one connection thread");
        // The socket moves between the runtimes' reactors as a std socket (non-blocking).
        let std_stream = match stream.into_std() {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(error = %e, %peer, "cannot hand the connection over");
                return;
            }
        };
        let open = thread.open.clone();
        open.fetch_add(1, Ordering::Relaxed);
        thread.handle.spawn(async move {
            let _open = OpenGuard(open);
            match TcpStream::from_std(std_stream) {
                Ok(stream) => serve(stream).await,
                Err(e) => tracing::debug!(error = %e, %peer, "cannot register the connection"),
            }
        });
    }
}

impl Drop for ConnThreads {
    /// Stops every thread (their runtimes drop what is left of their connections) and
    /// waits for them (a blocking join, bounded by [`CONN_THREAD_STOP`] per thread), so that
    /// no connection task holds the store once the server has returned. Tool calls on the
    /// main runtime were aborted with their connections; an abort takes effect at the
    /// tool's next await.
    fn drop(&mut self) {
        for t in &mut self.threads {
            t.stop.take();
        }
        for t in &mut self.threads {
            if let Some(join) = t.join.take() {
                let _ = join.join();
            }
        }
    }
}

/// Counts a connection as open on its thread until dropped.
struct OpenGuard(Arc<AtomicUsize>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
