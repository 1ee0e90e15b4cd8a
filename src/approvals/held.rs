//! [`Held`]: a tool call waiting for its approval's record to say how it ended. It wakes
//! when this daemon decides or cancels it (the new record is handed over), when another
//! daemon changed it (a notification, see `wake`), at its timeout, or at its slow poll;
//! meanwhile it renews its lease. Dropped before its wait ended (the bridge hung up), it
//! records the approval as cancelled: the call never ran.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{oneshot, Notify};

use super::{Approvals, Handed, Outcome, LEASE};
use crate::store::approvals::ApprovalRecord;

/// A held call, waiting.
pub struct Held {
    approvals: Approvals,
    record: ApprovalRecord,
    rx: Option<oneshot::Receiver<ApprovalRecord>>,
    wake: Arc<Notify>,
    timeout: Duration,
    done: bool,
}

impl Held {
    pub(super) fn new(
        approvals: Approvals,
        record: ApprovalRecord,
        rx: oneshot::Receiver<ApprovalRecord>,
        wake: Arc<Notify>,
        timeout: Duration,
    ) -> Self {
        Held {
            approvals,
            record,
            rx: Some(rx),
            wake,
            timeout,
            done: false,
        }
    }

    pub fn id(&self) -> &str {
        &self.record.id
    }

    /// Waits until the approval's record says how it ended: a decision (here or through
    /// another daemon), the timeout (denied), or a cancellation (its run ended, callbackd
    /// stops). Meanwhile renews the lease and watches the run.
    pub async fn wait(mut self) -> Outcome {
        let mut rx = self.rx.take().expect("waited once");
        let deadline = tokio::time::Instant::now() + self.timeout;
        let mut poll = tokio::time::interval(self.approvals.inner.poll);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut lease = tokio::time::interval(LEASE / 3);
        lease.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        lease.tick().await; // the first tick is now: the lease was just taken
        let wake = self.wake.clone();
        let mut told = false;
        let rec = loop {
            let rec = tokio::select! {
                r = &mut rx, if !told => {
                    told = true;
                    match r {
                        Ok(rec) => Some(rec),
                        Err(_) => self.check().await,
                    }
                }
                () = tokio::time::sleep_until(deadline) => self.expire().await,
                () = wake.notified() => self.check().await,
                _ = poll.tick() => self.check().await,
                _ = lease.tick() => {
                    self.approvals.renew().await;
                    None
                }
            };
            if let Some(rec) = rec.filter(|r| r.state != "pending") {
                break rec;
            }
        };
        self.done = true;
        self.approvals.lock().remove(&self.record.id);
        Outcome::of(&rec, self.timeout).unwrap_or(Outcome::Cancelled {
            reason: format!("the approval is {}", rec.state),
        })
    }

    /// Reads the row; ends a pending approval whose run has ended. The record when it is
    /// no longer pending (announced here when this holder learnt it first).
    async fn check(&self) -> Option<ApprovalRecord> {
        let (ns, id) = (&self.record.ns, &self.record.id);
        let approvals = &self.approvals;
        let rec = approvals.inner.records.approval(ns, id).await.ok()??;
        let rec = if rec.state == "pending" {
            let run = self.record.run_id.as_deref()?;
            let status = approvals.run_ended(ns, &self.record.agent_id, run).await?;
            let reason = format!("its run {run} ended ({status}) while the approval was pending");
            match approvals
                .end(ns, id, "cancelled", reason, &["pending"])
                .await
            {
                Some(rec) => rec,
                None => approvals.inner.records.approval(ns, id).await.ok()??,
            }
        } else {
            rec
        };
        if rec.state != "pending" {
            if let Handed::Given = approvals.hand_over(rec.clone()) {
                approvals.resolved(&rec);
            }
        }
        Some(rec)
    }

    /// The timeout: expired (denied), unless something else ended it first.
    async fn expire(&self) -> Option<ApprovalRecord> {
        let (ns, id) = (&self.record.ns, &self.record.id);
        let reason = format!(
            "no decision within {} s: denied, not run",
            self.timeout.as_secs()
        );
        let approvals = &self.approvals;
        match approvals.end(ns, id, "expired", reason, &["pending"]).await {
            Some(rec) => {
                if let Handed::Given = approvals.hand_over(rec.clone()) {
                    approvals.resolved(&rec);
                }
                Some(rec)
            }
            None => self.check().await,
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let (approvals, record) = (self.approvals.clone(), self.record.clone());
        // The waiter stays until the record says so: a decision racing this finds its
        // holder gone and records the same.
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move {
                    approvals
                        .unrun(&record, "the bridge dropped the tool call".into())
                        .await;
                    approvals.lock().remove(&record.id);
                });
            }
            Err(_) => {
                approvals.lock().remove(&record.id);
            }
        }
    }
}
