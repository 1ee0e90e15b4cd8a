//! [`QuotaGate`]: the quotas of docs/namespaces.md, checked in front of the store's writes
//! (the bridge's `CallStore`). A refused call answers `resource_exhausted` naming the
//! namespace and the quota, writes nothing, and touches no other namespace's state.
//!
//! - `max_events_per_run`: handed to the append itself ([`NewEvent::max_events`]), which
//!   checks it against the seq it assigns inside its transaction: exact, free.
//! - `max_agents`: counted (an index count) before an `agents.create`, with the namespace's
//!   creates one at a time, so concurrent creates cannot overshoot (on one daemon).
//! - `max_stored_bytes`: a per-namespace total read from the store (`usage`, a scan of the
//!   namespace's rows) in the background every [`REFRESH`] ([`QuotaGate::refresh_forever`]),
//!   plus each accepted write's size in between. A write's size is reserved in the total
//!   when it is admitted (checked and added under one lock) and given back if the write
//!   fails, so concurrent writes (a fork copies megabytes between its check and its end)
//!   cannot all pass one check against the same total. Only a namespace's very first write waits
//!   for a scan (one scan, however many writes arrive meanwhile): the scan is never on the
//!   request path after that.
//! - `max_appends_per_second`: a token bucket per namespace, a second's worth deep.
//!
//! A namespace without quotas costs one settings lookup per call.
//!
//! [`NewEvent::max_events`]: crate::store::NewEvent

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Namespaces, OverRate, Quotas};
use crate::metrics::Metrics;
use crate::store::{Namespace, RunRecords, StoreCall, StoreError};

/// How often the stored-bytes total of a namespace written to since is read again: a scan
/// of its rows, so not often (deletes and replaced documents are counted only then).
pub const REFRESH: Duration = Duration::from_secs(60);
/// The longest an append waits for the rate bucket (`over_rate = "delay"`).
pub const MAX_DELAY: Duration = Duration::from_secs(1);

/// The quota checks, shared by the store service's handlers.
#[derive(Clone)]
pub struct QuotaGate {
    inner: Arc<Inner>,
}

struct Inner {
    namespaces: Namespaces,
    records: Arc<dyn RunRecords>,
    metrics: Metrics,
    state: Mutex<HashMap<Namespace, NsState>>,
}

#[derive(Default)]
struct NsState {
    bucket: Option<Bucket>,
    /// The stored-bytes total: the last one read from the store, plus the writes since.
    bytes: Option<u64>,
    /// Bytes of writes admitted and not yet done (or failed): counted as stored, and kept
    /// apart from `bytes` so that a new read of the total neither loses nor doubles them.
    pending: u64,
    /// Whether a write was accepted since the total was last read (an idle namespace is
    /// not scanned again).
    written: bool,
    /// Serializes the namespace's `agents.create` calls while `max_agents` is set.
    creates: Arc<tokio::sync::Mutex<()>>,
    /// Held by the one write that reads the first total, so that others wait for it
    /// instead of each starting a scan.
    first_scan: Arc<tokio::sync::Mutex<()>>,
}

/// A token bucket: `rate` tokens a second, at most `rate` held.
struct Bucket {
    rate: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn new(rate: u64) -> Self {
        Bucket {
            rate: rate as f64,
            tokens: rate as f64,
            at: Instant::now(),
        }
    }

    /// Takes a token; else how long until one is there.
    fn take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.rate);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.rate))
        }
    }
}

/// What an admitted call holds until it is done: the namespace's create lock, and the
/// bytes it reserved in the namespace's total (given back when dropped without
/// [`QuotaGate::done`]: the write failed).
#[must_use]
pub struct Admitted {
    _create: Option<tokio::sync::OwnedMutexGuard<()>>,
    bytes: Option<Reserved>,
}

/// Bytes reserved in a namespace's stored-bytes total.
struct Reserved {
    gate: QuotaGate,
    ns: Namespace,
    n: u64,
    /// The write succeeded: its bytes move from pending to the total.
    written: bool,
}

impl Drop for Reserved {
    fn drop(&mut self) {
        let (n, written) = (self.n, self.written);
        self.gate.state(&self.ns, |s| {
            s.pending = s.pending.saturating_sub(n);
            if written {
                if let Some(total) = s.bytes.as_mut() {
                    *total = total.saturating_add(n);
                }
                s.written = true;
            }
        });
    }
}

impl QuotaGate {
    pub fn new(namespaces: Namespaces, records: Arc<dyn RunRecords>, metrics: Metrics) -> Self {
        QuotaGate {
            inner: Arc::new(Inner {
                namespaces,
                records,
                metrics,
                state: Mutex::default(),
            }),
        }
    }

    /// Checks `call` of `ns` (a request body of `size` bytes) against the namespace's
    /// quotas, waiting for the rate bucket if so configured; sets the append's event quota.
    pub async fn admit(
        &self,
        ns: &Namespace,
        call: &mut StoreCall,
        size: usize,
    ) -> Result<Admitted, StoreError> {
        let mut admitted = Admitted {
            _create: None,
            bytes: None,
        };
        let Some(settings) = self.inner.namespaces.settings(ns) else {
            return Ok(admitted);
        };
        let q = settings.quotas;
        if q == Quotas::default() {
            return Ok(admitted);
        }
        if let StoreCall::EventsAppend(ev) = call {
            ev.max_events = q.max_events_per_run;
            if let Some(rate) = q.max_appends_per_second {
                self.rate(ns, rate, q.over_rate).await?;
            }
        }
        let writes = matches!(
            call,
            StoreCall::AgentsCreate(_)
                | StoreCall::AgentsUpdate(_)
                | StoreCall::RunsCreate(_)
                | StoreCall::RunsUpdate(_)
                | StoreCall::EventsAppend(_)
                | StoreCall::CheckpointsCreate { .. }
                | StoreCall::CheckpointsUpdate { .. }
        );
        if let (true, Some(max)) = (writes, q.max_stored_bytes) {
            self.stored_bytes(ns).await?;
            let size = size as u64;
            // Checked and reserved at once: a concurrent write sees this one's bytes.
            let refused = self.state(ns, |s| {
                let used = s.bytes.unwrap_or(0).saturating_add(s.pending);
                if used.saturating_add(size) > max {
                    return Some(used);
                }
                s.pending += size;
                None
            });
            if let Some(used) = refused {
                return Err(self.refuse(
                    ns,
                    "max_stored_bytes",
                    format!(
                        "namespace {} is at its max_stored_bytes quota ({max} bytes; {used} \
                         stored or being written); nothing was written",
                        ns.as_str()
                    ),
                ));
            }
            admitted.bytes = Some(Reserved {
                gate: self.clone(),
                ns: ns.clone(),
                n: size,
                written: false,
            });
        }
        if let (StoreCall::AgentsCreate(_), Some(max)) = (&*call, q.max_agents) {
            let lock = self.state(ns, |s| s.creates.clone());
            let guard = lock.lock_owned().await;
            let agents = self.inner.records.agent_count(ns).await?;
            if agents >= max {
                return Err(self.refuse(
                    ns,
                    "max_agents",
                    format!(
                        "namespace {} is at its max_agents quota ({max}); delete an agent \
                         first; nothing was written",
                        ns.as_str()
                    ),
                ));
            }
            admitted._create = Some(guard);
        }
        Ok(admitted)
    }

    /// A call admitted by [`admit`](Self::admit) succeeded: what it reserved stays counted.
    pub fn done(&self, mut admitted: Admitted) {
        if let Some(reserved) = admitted.bytes.as_mut() {
            reserved.written = true;
        }
    }

    /// Counts a refusal by the quota's own error (the event quota is checked by the
    /// backend, which cannot reach the metrics).
    pub fn refused_by_store(&self, ns: &Namespace, e: &StoreError) {
        if let StoreError::Quota(_) = e {
            self.inner
                .metrics
                .quota_refused(ns.as_str(), "max_events_per_run");
        }
    }

    fn refuse(&self, ns: &Namespace, quota: &'static str, message: String) -> StoreError {
        self.inner.metrics.quota_refused(ns.as_str(), quota);
        tracing::info!(namespace = ns.as_str(), quota, "call refused by a quota");
        StoreError::Quota(message)
    }

    fn state<T>(&self, ns: &Namespace, f: impl FnOnce(&mut NsState) -> T) -> T {
        let mut map = self.inner.state.lock().unwrap_or_else(|p| p.into_inner());
        f(map.entry(ns.clone()).or_default())
    }

    async fn rate(&self, ns: &Namespace, rate: u64, over: OverRate) -> Result<(), StoreError> {
        let deadline = Instant::now() + MAX_DELAY;
        loop {
            let now = Instant::now();
            let wait = self.state(ns, |s| {
                let bucket = s.bucket.get_or_insert_with(|| Bucket::new(rate));
                if bucket.rate != rate as f64 {
                    *bucket = Bucket::new(rate);
                }
                bucket.take(now)
            });
            let wait = match wait {
                Ok(()) => return Ok(()),
                Err(wait) => wait,
            };
            if over == OverRate::Refuse || now + wait > deadline {
                return Err(self.refuse(
                    ns,
                    "max_appends_per_second",
                    format!(
                        "namespace {} is over its max_appends_per_second quota ({rate}); \
                         nothing was written",
                        ns.as_str()
                    ),
                ));
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// The namespace's stored bytes: the last total read from the store, plus what was
    /// written since. Read from the store here only the first time.
    async fn stored_bytes(&self, ns: &Namespace) -> Result<u64, StoreError> {
        if let Some(n) = self.state(ns, |s| s.bytes) {
            return Ok(n);
        }
        let lock = self.state(ns, |s| s.first_scan.clone());
        let _first = lock.lock().await;
        if let Some(n) = self.state(ns, |s| s.bytes) {
            return Ok(n);
        }
        self.scan(ns).await
    }

    /// Reads `ns`'s total from the store.
    async fn scan(&self, ns: &Namespace) -> Result<u64, StoreError> {
        let usage = self.inner.records.usage(Some(ns)).await?;
        let n = usage.first().map_or(0, |u| u.stored_bytes);
        self.state(ns, |s| {
            s.bytes = Some(n);
            s.written = false;
        });
        Ok(n)
    }

    /// Reads the stored-bytes total of every namespace with `max_stored_bytes` (as
    /// configured now) at once and every [`REFRESH`], one namespace at a time, until aborted. Deletes
    /// are counted from then on; writes since the last read were added as they came.
    pub async fn refresh_forever(self) {
        loop {
            let table = self.inner.namespaces.table();
            for (ns, settings) in &table.settings {
                let idle = self.state(ns, |s| s.bytes.is_some() && !s.written);
                if settings.quotas.max_stored_bytes.is_none() || idle {
                    continue;
                }
                if let Err(e) = self.scan(ns).await {
                    tracing::warn!(namespace = ns.as_str(), error = %e, "cannot read the namespace's stored bytes; the last total stays in force");
                }
            }
            tokio::time::sleep(REFRESH).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_allows_a_seconds_worth_then_the_rate() {
        let t0 = Instant::now();
        let mut b = Bucket::new(10);
        for _ in 0..10 {
            assert!(b.take(t0).is_ok());
        }
        let wait = b.take(t0).unwrap_err();
        assert!(wait <= Duration::from_millis(100) && wait > Duration::ZERO);
        assert!(b.take(t0 + Duration::from_millis(100)).is_ok());
        assert!(b.take(t0 + Duration::from_millis(100)).is_err());
        // Idle for long: still only a second's worth.
        let later = t0 + Duration::from_secs(60);
        assert_eq!((0..20).filter(|_| b.take(later).is_ok()).count(), 10);
    }

    /// Two writes admitted at once (a fork's copy is long) cannot both pass one check of the
    /// same total: the first reserves its bytes at admission, so the second is refused while
    /// the first is still writing; a failed write (dropped, not `done`) gives its bytes back.
    #[tokio::test]
    async fn concurrent_writes_cannot_overshoot_max_stored_bytes() {
        use crate::store::sqlite::{SqliteOptions, SqliteStore};
        use crate::store::Store;

        let dir = tempfile::tempdir().unwrap();
        let store =
            Arc::new(SqliteStore::open(&SqliteOptions::new(dir.path().join("q.db"))).unwrap());
        let mut table = super::super::Table::default();
        let ns = Namespace::default();
        let mut settings = table
            .settings
            .get(&ns)
            .map(|s| (**s).clone())
            .unwrap_or_default();
        settings.quotas.max_stored_bytes = Some(1_000);
        table.settings.insert(ns.clone(), Arc::new(settings));
        let metrics = Metrics::new(store.subscribe(), crate::metrics::StoreSizes::default, None);
        let gate = QuotaGate::new(Namespaces::new(table), store.clone().run_records(), metrics);
        let append = || {
            StoreCall::parse(
                "runEvents",
                "append",
                r#"{"runId":"r","eventType":"e","payload":1}"#,
            )
            .unwrap()
        };

        let first = gate
            .admit(&ns, &mut append(), 600)
            .await
            .expect("room for one");
        // The first has not finished writing: its 600 bytes already count.
        let second = gate.admit(&ns, &mut append(), 600).await;
        assert!(
            matches!(second, Err(StoreError::Quota(_))),
            "a second 600-byte write passed while the first was in flight: {:?}",
            second.err()
        );
        // The first write failed (dropped without `done`): its room is free again.
        drop(first);
        let third = gate
            .admit(&ns, &mut append(), 600)
            .await
            .expect("room again");
        gate.done(third);
        let fourth = gate.admit(&ns, &mut append(), 600).await;
        assert!(fourth.is_err(), "600 written, 600 more is over 1000");
    }
}
