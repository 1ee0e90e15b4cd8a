//! The workloads of issue 5, and [`measure`], which runs one phase of concurrent clients
//! against a target and takes the server's CPU and memory figures around it.

pub mod agents_list;
pub mod append;
pub mod burst;
pub mod capacity;
pub mod floor;
pub mod growth;
pub mod growth_fill;
pub mod namespaces;
pub mod replay;
pub mod stream;
pub mod telemetry;
pub mod turn;

use std::future::Future;
use std::time::{Duration, Instant};

use crate::client::{Conn, Recorder};
use crate::target::{cpu_time, reset_peak, rss_kib, Target};

/// What one phase measured.
#[derive(Default, Clone)]
pub struct Measured {
    pub calls: usize,
    pub wall: Duration,
    /// Sorted, nanoseconds.
    pub latencies: Vec<u64>,
    pub errors: u64,
    pub wrong: u64,
    pub examples: Vec<String>,
    pub server_cpu: Option<Duration>,
    pub peak_rss_kib: Option<u64>,
    pub loadgen_cpu: Option<Duration>,
    /// `append` only: the latencies of each run's first append, and of the others (sorted,
    /// ns): a fresh run's first append is the one that reads its place in the event index.
    pub first_of_run: Vec<u64>,
    pub later_in_run: Vec<u64>,
}

impl Measured {
    pub fn rate(&self) -> f64 {
        self.calls as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    /// The `p`-quantile latency (`p` in 0..=1).
    pub fn quantile(&self, p: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let rank =
            ((p * self.latencies.len() as f64).ceil() as usize).clamp(1, self.latencies.len());
        Duration::from_nanos(self.latencies[rank - 1])
    }

    pub fn cpu_per_call(&self) -> Option<Duration> {
        self.server_cpu
            .map(|c| c / u32::try_from(self.calls.max(1)).unwrap_or(u32::MAX))
    }

    /// Adds a failure found after the phase (a read-back check).
    pub fn wrong(&mut self, msg: String) {
        self.wrong += 1;
        if self.examples.len() < 3 {
            self.examples.push(format!("wrong answer: {msg}"));
        }
    }
}

/// Opens `clients` connections, then runs `client(i, conn)` for each concurrently and times
/// the whole; each client returns its recorder and whatever the workload checks afterwards.
pub async fn measure<T, F, Fut>(
    target: &Target,
    clients: usize,
    client: F,
) -> anyhow::Result<(Measured, Vec<T>)>
where
    T: Send + 'static,
    F: Fn(usize, Conn) -> Fut,
    Fut: Future<Output = (Recorder, T)> + Send + 'static,
{
    let mut conns = Vec::with_capacity(clients);
    for i in 0..clients {
        conns.push(Conn::connect(target.endpoint(i)).await?);
    }
    if let Some(pid) = target.pid {
        reset_peak(pid);
    }
    let self_pid = std::process::id();
    let server_cpu0 = target.cpu();
    let self_cpu0 = cpu_time(self_pid);
    let started = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(i, conn)| tokio::spawn(client(i, conn)))
        .collect();
    let mut rec = Recorder::default();
    let mut outs = Vec::with_capacity(clients);
    for task in tasks {
        let (r, out) = task.await?;
        rec.merge(r);
        outs.push(out);
    }
    let wall = started.elapsed();
    let server_cpu = match (server_cpu0, target.cpu()) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    let loadgen_cpu = match (self_cpu0, cpu_time(self_pid)) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    let mut latencies = rec.latencies;
    latencies.sort_unstable();
    Ok((
        Measured {
            calls: latencies.len(),
            wall,
            latencies,
            errors: rec.errors,
            wrong: rec.wrong,
            examples: rec.examples,
            server_cpu,
            peak_rss_kib: target.pid.and_then(rss_kib).map(|(_, hwm)| hwm),
            loadgen_cpu,
            ..Measured::default()
        },
        outs,
    ))
}

/// A page's length and CRC-32, what the timed passes of `replay` and `agents-list` compare
/// their answers with. Comparing the bytes themselves read a cold copy of every reference
/// page (17 MB of them for `replay`) on each answer: ~40 µs a page, a fifth of the bench's
/// own CPU per page, added to every round trip it timed. The received bytes are still in
/// cache when they are checksummed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    len: usize,
    crc: u32,
}

impl Fingerprint {
    pub fn of(bytes: &[u8]) -> Self {
        Fingerprint {
            len: bytes.len(),
            crc: crc32fast::hash(bytes),
        }
    }
}

/// The `output` of a CallStore answer, or `None` when it is unset (`{}` or `null`).
pub fn output(body: &[u8]) -> Result<Option<serde_json::Value>, String> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("answer is not JSON: {e}"))?;
    match v.get("output") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(o) => Ok(Some(o.clone())),
    }
}

/// True when `key` is absent, null or empty: the contract's "no more pages".
pub fn no_cursor(output: &serde_json::Value, key: &str) -> bool {
    output
        .get(key)
        .is_none_or(|v| v.is_null() || v.as_str() == Some(""))
}

/// Epoch milliseconds now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
