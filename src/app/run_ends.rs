//! [`RunEnds`]: who hears a run's end. The store announces it
//! ([`StoreNotice::RunEnded`](crate::store::StoreNotice::RunEnded)) after the commit of the
//! `runs.update` that ended the run, whoever wrote it (the bridge through the store RPC, or
//! callbackd's own `bridge::RunEnder` for a run no bridge will finish), and this listener
//! tells the rest of the daemon:
//! - the approvals: the run's pending approvals are cancelled now (not at the held call's
//!   next poll), since their calls can no longer run;
//! - the traces (`[telemetry]`): the run is traced;
//! - the metrics and the log: `runs_total`, `run_duration_seconds`, a `run ended` line;
//! - the supervised bridge's runs file (`bridge::BridgeRuns`): the run is taken out of it.
//!
//! A listener runs on the committing thread and must not block: the cancellation is
//! spawned on the daemon's runtime, the runs file written on its blocking pool, the trace
//! is a `try_send`, the metrics are counters.
//! The store holds the listener, and the approvals hold the store: the listener holds
//! [`RunEnds`] weakly (the [`App`](super::App) keeps it), so nothing keeps the other alive.

use std::sync::{Arc, Weak};

use crate::approvals::Approvals;
use crate::bridge::BridgeRuns;
use crate::metrics::Metrics;
use crate::run::RunStatus;
use crate::store::{Namespace, Store, StoreNotice};
use crate::telemetry::Traces;

/// What a run's end is told to.
pub(super) struct RunEnds {
    pub approvals: Approvals,
    pub traces: Option<Traces>,
    pub metrics: Metrics,
    pub bridge_runs: BridgeRuns,
    /// Where the cancellations run (a listener may be called off the runtime: SQLite's
    /// writer thread).
    pub runtime: tokio::runtime::Handle,
}

impl RunEnds {
    /// Listens to `store`'s run ends from now on, for as long as the returned `Arc` lives.
    pub(super) fn listen(self, store: &dyn Store) -> Arc<RunEnds> {
        let ends = Arc::new(self);
        let weak: Weak<RunEnds> = Arc::downgrade(&ends);
        store.listen(Arc::new(move |notice| {
            if let StoreNotice::RunEnded { ns, run_id, status } = notice {
                if let Some(ends) = weak.upgrade() {
                    ends.heard(ns, run_id, *status);
                }
            }
        }));
        ends
    }

    fn heard(&self, ns: &Namespace, run_id: &str, status: RunStatus) {
        let (approvals, ns_, run) = (self.approvals.clone(), ns.clone(), run_id.to_string());
        self.runtime.spawn(async move {
            let reason = format!("its run {run} ended ({status}) while the approval was pending");
            approvals.cancel_run(&ns_, &run, &reason).await;
        });
        // Only a run of the supervised bridge is in the runs file: no blocking task for the
        // others (every run of a daemon that supervises none).
        if self.bridge_runs.holds(ns, run_id) {
            let (runs, ns_, run) = (self.bridge_runs.clone(), ns.clone(), run_id.to_string());
            self.runtime.spawn_blocking(move || runs.ended(&ns_, &run));
        }
        if let Some(traces) = &self.traces {
            traces.run_ended(ns, run_id);
        }
        self.metrics.run_ended(ns.as_str(), run_id, status.as_str());
        tracing::info!(
            target: "callbackd::runs",
            namespace = ns.as_str(),
            run_id,
            status = status.as_str(),
            "run ended"
        );
    }
}
