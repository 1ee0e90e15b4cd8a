//! Human approval of tool calls (issues 15 and 25): a call whose policy (`tools::approval`) holds it waits,
//! recorded as a pending approval, until a person decides over the run API
//! (`POST /v1/approvals/{id}`), its time runs out (`expired`: denied, never run), or the call
//! can no longer run (`cancelled`, with the reason: its run ended, the bridge hung up or
//! retried the turn, callbackd stopped, or the daemon holding it is gone). Every stream of the
//! call's run shows the pending approval (`approval_required`, on every (re)connect while it
//! is pending) and its end (`approval_resolved`). Neither is a numbered event: the run's
//! numbered events are the bridge's own log, and an approval is callbackd's state beside it.
//!
//! The record is the truth: every change is one conditional update of the approval's row
//! (`pending` → the new state), so a decision and a cancellation racing each other cannot
//! both win, and the held call acts on what the row says, never on what it was told.
//! A pending approval belongs to the daemon that holds its call ([`Approvals::owner`]),
//! which renews a lease on it while it waits; a decision made through any daemon sharing
//! the database reaches the holder, which reads its row every [`POLL`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{broadcast, oneshot};

use crate::clock::{now_ms, rfc3339_ms};
use crate::store::approvals::{ApprovalChange, ApprovalRecord, ApprovalRecords};
use crate::store::{Namespace, Store, StoreCall, StoreError};

/// How often a held call reads its approval's row (a decision made through another daemon,
/// a cancellation) and its run's status (ended).
pub const POLL: Duration = Duration::from_millis(400);
/// How long a daemon vouches for its held calls: it renews the lease every third of this;
/// a pending approval whose lease ran out is cancelled by any daemon.
pub const LEASE: Duration = Duration::from_secs(15);
/// How often a daemon cancels pending approvals whose owner's lease ran out.
pub const SWEEP: Duration = Duration::from_secs(5);

/// An approval as the API and the stream show it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ApprovalView {
    pub id: String,
    pub tool: String,
    pub tool_call_id: Option<String>,
    /// The call's arguments, as the model gave them.
    #[schemars(with = "serde_json::Map<String, Value>")]
    pub args: Value,
    /// The arguments a person edited before approving (what the tool ran with).
    pub approved_args: Option<Value>,
    /// Whether the tool ran with arguments a person edited.
    pub edited: bool,
    pub expires_at: String,
    pub created_at: String,
    pub session_id: String,
    pub run_id: Option<String>,
    /// `pending`, `approved`, `denied`, `expired` or `cancelled`.
    pub state: String,
    pub decided_by: Option<String>,
    pub decided_at: Option<String>,
    pub reason: Option<String>,
}

impl From<&ApprovalRecord> for ApprovalView {
    fn from(r: &ApprovalRecord) -> Self {
        ApprovalView {
            id: r.id.clone(),
            tool: r.tool.clone(),
            tool_call_id: r.tool_call_id.clone(),
            args: r.args.clone(),
            approved_args: r.approved_args.clone(),
            edited: r.approved_args.is_some(),
            expires_at: rfc3339_ms(r.expires_at_ms),
            created_at: rfc3339_ms(r.created_at_ms),
            session_id: r.agent_id.clone(),
            run_id: r.run_id.clone(),
            state: r.state.clone(),
            decided_by: r.decided_by.clone(),
            decided_at: r.decided_at_ms.map(rfc3339_ms),
            reason: r.reason.clone(),
        }
    }
}

/// What the streams of a run are told.
#[derive(Debug, Clone)]
pub enum ApprovalEvent {
    Required {
        ns: Namespace,
        run_id: Option<String>,
        approval: Box<ApprovalView>,
    },
    Resolved {
        ns: Namespace,
        run_id: Option<String>,
        approval_id: String,
        decision: String,
        by: Option<String>,
        reason: Option<String>,
        edited: bool,
    },
}

impl ApprovalEvent {
    pub fn is_for(&self, ns: &Namespace, run: &str) -> bool {
        let (n, r) = match self {
            ApprovalEvent::Required { ns, run_id, .. }
            | ApprovalEvent::Resolved { ns, run_id, .. } => (ns, run_id),
        };
        n == ns && r.as_deref() == Some(run)
    }
}

/// How a held call's wait ended, as its approval's record says.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Run it, with `args` when a person edited them.
    Approved {
        by: String,
        args: Option<Value>,
    },
    Denied {
        by: String,
        reason: Option<String>,
    },
    /// No decision in time: denied.
    Expired {
        after: Duration,
    },
    /// It can no longer run (its run ended, callbackd stops, ...).
    Cancelled {
        reason: String,
    },
}

impl Outcome {
    fn of(rec: &ApprovalRecord, timeout: Duration) -> Option<Outcome> {
        let by = || rec.decided_by.clone().unwrap_or_default();
        Some(match rec.state.as_str() {
            "approved" => Outcome::Approved {
                by: by(),
                args: rec.approved_args.clone(),
            },
            "denied" => Outcome::Denied {
                by: by(),
                reason: rec.reason.clone(),
            },
            "expired" => Outcome::Expired { after: timeout },
            "cancelled" => Outcome::Cancelled {
                reason: rec.reason.clone().unwrap_or_default(),
            },
            _ => return None,
        })
    }
}

/// A decision that could not be made.
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    #[error("no approval {0:?}")]
    NotFound(String),
    /// Already decided, expired or cancelled.
    #[error("approval {} is already {}", .0.id, .0.state)]
    Decided(Box<ApprovalRecord>),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A person's decision.
#[derive(Debug, Clone)]
pub struct Decision {
    pub approve: bool,
    pub by: String,
    pub reason: Option<String>,
    /// Edited arguments to run the tool with (approve only), already checked.
    pub args: Option<Value>,
}

/// A held call of this daemon: whom to tell its approval's new record, and what it is.
struct Waiter {
    /// Taken by whoever first learns of the end (a local decision or the holder's own
    /// reading of the row): that one announces it.
    tx: Option<oneshot::Sender<ApprovalRecord>>,
    ns: Namespace,
    agent_id: String,
    tool_call_id: Option<String>,
}

/// The approvals of the daemon: their records, the calls waiting on them, and the
/// notifications the streams follow.
#[derive(Clone)]
pub struct Approvals {
    inner: Arc<Inner>,
}

struct Inner {
    records: Arc<dyn ApprovalRecords>,
    /// Where a held call's run status is read (unset: runs are not watched).
    store: Option<Arc<dyn Store>>,
    owner: String,
    waiting: Mutex<HashMap<String, Waiter>>,
    events: broadcast::Sender<ApprovalEvent>,
}

/// A held call, waiting. Dropped before its wait ended (the bridge hung up), it records the
/// approval as cancelled: it never ran.
pub struct Held {
    approvals: Approvals,
    record: ApprovalRecord,
    rx: Option<oneshot::Receiver<ApprovalRecord>>,
    timeout: Duration,
    done: bool,
}

impl Approvals {
    pub fn new(records: Arc<dyn ApprovalRecords>) -> Self {
        Self::with_store(records, None)
    }

    /// Approvals whose held calls also end when their run ends (read from `store`).
    pub fn with_store(records: Arc<dyn ApprovalRecords>, store: Option<Arc<dyn Store>>) -> Self {
        let owner = new_id("own_").unwrap_or_else(|_| format!("own_{}", std::process::id()));
        Approvals {
            inner: Arc::new(Inner {
                records,
                store,
                owner,
                waiting: Mutex::default(),
                events: broadcast::channel(256).0,
            }),
        }
    }

    /// This daemon's id as the owner of the approvals it holds.
    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    pub fn subscribe(&self) -> broadcast::Receiver<ApprovalEvent> {
        self.inner.events.subscribe()
    }

    pub fn records(&self) -> &Arc<dyn ApprovalRecords> {
        &self.inner.records
    }

    /// Holds a call: records the pending approval and tells the run's streams.
    #[allow(clippy::too_many_arguments)]
    pub async fn hold(
        &self,
        ns: &Namespace,
        agent_id: &str,
        run_id: Option<String>,
        tool: &str,
        tool_call_id: Option<String>,
        args: &Value,
        timeout: Duration,
    ) -> Result<Held, StoreError> {
        let now = now_ms();
        let record = ApprovalRecord {
            id: new_id("appr_").map_err(|e| StoreError::Internal(e.to_string()))?,
            ns: ns.clone(),
            agent_id: agent_id.to_string(),
            run_id,
            tool: tool.to_string(),
            tool_call_id,
            args: args.clone(),
            created_at_ms: now,
            expires_at_ms: now + timeout.as_millis() as i64,
            state: "pending".into(),
            decided_by: None,
            decided_at_ms: None,
            reason: None,
            owner: self.inner.owner.clone(),
            lease_until_ms: now + LEASE.as_millis() as i64,
            approved_args: None,
        };
        // The bridge calls a tool again with the same call id when it retries the turn: the
        // earlier attempt's call is abandoned and will never get its result.
        let abandoned: Vec<String> = match &record.tool_call_id {
            Some(call) => self
                .lock()
                .iter()
                .filter(|(_, w)| {
                    &w.ns == ns && w.agent_id == agent_id && w.tool_call_id.as_ref() == Some(call)
                })
                .map(|(id, _)| id.clone())
                .collect(),
            None => Vec::new(),
        };
        for id in abandoned {
            self.cancel(
                ns,
                &id,
                "the bridge retried the turn and abandoned this attempt of the call".into(),
            )
            .await;
        }
        let (tx, rx) = oneshot::channel();
        self.lock().insert(
            record.id.clone(),
            Waiter {
                tx: Some(tx),
                ns: ns.clone(),
                agent_id: agent_id.to_string(),
                tool_call_id: record.tool_call_id.clone(),
            },
        );
        if let Err(e) = self.inner.records.insert_approval(record.clone()).await {
            self.lock().remove(&record.id);
            return Err(e);
        }
        tracing::info!(approval = %record.id, tool, agent_id, "a tool call waits for approval");
        let _ = self.inner.events.send(ApprovalEvent::Required {
            ns: ns.clone(),
            run_id: record.run_id.clone(),
            approval: Box::new(ApprovalView::from(&record)),
        });
        Ok(Held {
            approvals: self.clone(),
            record,
            rx: Some(rx),
            timeout,
            done: false,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiter>> {
        self.inner.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands a new record of approval `id` to its local holder, if it is here and nobody
    /// did yet. `None`: it was handed over (the caller announces it); `Some(rec)`: the
    /// holder is gone (the record is given back); else nothing to hand (no local holder,
    /// or already handed): `announce` says whether the caller should announce it.
    fn hand_over(&self, rec: ApprovalRecord) -> Handed {
        let tx = match self.lock().get_mut(&rec.id) {
            None => return Handed::NotHere,
            Some(w) => w.tx.take(),
        };
        match tx {
            None => Handed::Taken,
            Some(tx) => match tx.send(rec) {
                Ok(()) => Handed::Given,
                Err(rec) => Handed::HolderGone(Box::new(rec)),
            },
        }
    }

    /// Decides approval `id` of namespace `ns`.
    pub async fn decide(
        &self,
        ns: &Namespace,
        id: &str,
        decision: Decision,
    ) -> Result<ApprovalRecord, DecideError> {
        let rec = self
            .inner
            .records
            .approval(ns, id)
            .await?
            .ok_or_else(|| DecideError::NotFound(id.to_string()))?;
        if rec.state != "pending" {
            return Err(DecideError::Decided(Box::new(rec)));
        }
        let state = if decision.approve {
            "approved"
        } else {
            "denied"
        };
        let changed = self
            .inner
            .records
            .change_approval(ApprovalChange {
                id: id.to_string(),
                state,
                by: Some(decision.by.clone()),
                reason: decision.reason.clone(),
                at_ms: now_ms(),
                approved_args: decision.args.filter(|_| decision.approve),
                from: &["pending"],
            })
            .await?;
        let rec = self.read(ns, id).await?;
        if !changed {
            return Err(DecideError::Decided(Box::new(rec)));
        }
        match self.hand_over(rec.clone()) {
            Handed::Given | Handed::NotHere => self.resolved(&rec),
            Handed::Taken => {}
            Handed::HolderGone(rec) => {
                // Its call ended before it could run: the approval did not take effect.
                let reason = "the bridge dropped the tool call before it could run".to_string();
                let rec = self.unrun(&rec, reason).await.unwrap_or(*rec);
                return Err(DecideError::Decided(Box::new(rec)));
            }
        }
        Ok(rec)
    }

    async fn read(&self, ns: &Namespace, id: &str) -> Result<ApprovalRecord, DecideError> {
        self.inner
            .records
            .approval(ns, id)
            .await?
            .ok_or_else(|| DecideError::NotFound(id.to_string()))
    }

    fn resolved(&self, rec: &ApprovalRecord) {
        tracing::info!(approval = %rec.id, decision = %rec.state, by = ?rec.decided_by, reason = ?rec.reason, "approval resolved");
        let _ = self.inner.events.send(ApprovalEvent::Resolved {
            ns: rec.ns.clone(),
            run_id: rec.run_id.clone(),
            approval_id: rec.id.clone(),
            decision: rec.state.clone(),
            by: rec.decided_by.clone(),
            reason: rec.reason.clone(),
            edited: rec.approved_args.is_some(),
        });
    }

    /// Ends pending approval `id` without a person (`expired`, `cancelled`), or (from
    /// `approved`) one whose call can no longer run. The record after it, if it changed.
    async fn end(
        &self,
        ns: &Namespace,
        id: &str,
        state: &'static str,
        reason: String,
        from: &'static [&'static str],
    ) -> Option<ApprovalRecord> {
        let change = ApprovalChange {
            id: id.to_string(),
            state,
            by: Some("callbackd".into()),
            reason: Some(reason),
            at_ms: now_ms(),
            approved_args: None,
            from,
        };
        match self.inner.records.change_approval(change).await {
            Ok(true) => self.inner.records.approval(ns, id).await.ok().flatten(),
            Ok(false) => None,
            Err(e) => {
                tracing::warn!(error = %e, approval = %id, "cannot record the approval's end");
                None
            }
        }
    }

    /// An approved call that will never run is recorded as cancelled.
    async fn unrun(&self, rec: &ApprovalRecord, reason: String) -> Option<ApprovalRecord> {
        let rec = self
            .end(
                &rec.ns,
                &rec.id,
                "cancelled",
                reason,
                &["pending", "approved"],
            )
            .await?;
        self.resolved(&rec);
        Some(rec)
    }

    /// Cancels pending approval `id` for `reason`; its holder, if here, is told at once
    /// (elsewhere, at its next reading of the row). Whether it was pending.
    pub async fn cancel(&self, ns: &Namespace, id: &str, reason: String) -> bool {
        let Some(rec) = self.end(ns, id, "cancelled", reason, &["pending"]).await else {
            return false;
        };
        match self.hand_over(rec.clone()) {
            Handed::Taken => {}
            _ => self.resolved(&rec),
        }
        true
    }

    /// Cancels the pending approvals of run `run_id`: it ended, or is being cancelled.
    pub async fn cancel_run(&self, ns: &Namespace, run_id: &str, reason: &str) -> usize {
        let mut n = 0;
        for a in self.pending_of_run(ns, run_id).await {
            if self.cancel(ns, &a.id, reason.to_string()).await {
                n += 1;
            }
        }
        n
    }

    /// Cancels every call this daemon holds (it is stopping): the bridge gets their answers
    /// now and can stop within its stop timeout.
    pub async fn cancel_held(&self, reason: &str) -> usize {
        let held: Vec<(String, Namespace)> = self
            .lock()
            .iter()
            .map(|(id, w)| (id.clone(), w.ns.clone()))
            .collect();
        let mut n = 0;
        for (id, ns) in held {
            if self.cancel(&ns, &id, reason.to_string()).await {
                n += 1;
            }
        }
        n
    }

    /// Cancels pending approvals whose owner's lease ran out (their daemon is gone).
    pub async fn sweep(&self) -> Result<usize, StoreError> {
        let gone = self
            .inner
            .records
            .cancel_abandoned_approvals(
                "the daemon holding the call stopped while the approval was pending",
                now_ms(),
            )
            .await?;
        for rec in &gone {
            self.resolved(rec);
        }
        Ok(gone.len())
    }

    /// Sweeps every [`SWEEP`], until aborted.
    pub fn spawn_sweeper(&self) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(SWEEP).await;
                match me.sweep().await {
                    Ok(0) => {}
                    Ok(n) => tracing::warn!(
                        approvals = n,
                        "pending approvals of a daemon that is gone were cancelled"
                    ),
                    Err(e) => tracing::warn!(error = %e, "cannot sweep abandoned approvals"),
                }
            }
        })
    }

    /// The pending approvals of a run, for a stream that (re)connects.
    pub async fn pending_of_run(&self, ns: &Namespace, run_id: &str) -> Vec<ApprovalView> {
        match self.inner.records.approvals(ns, Some("pending")).await {
            Ok(all) => all
                .iter()
                .filter(|r| r.run_id.as_deref() == Some(run_id))
                .map(ApprovalView::from)
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read pending approvals");
                Vec::new()
            }
        }
    }

    /// The status of a run, if it has ended.
    async fn run_ended(&self, ns: &Namespace, agent_id: &str, run_id: &str) -> Option<String> {
        let store = self.inner.store.as_ref()?;
        let call = StoreCall::RunsGet {
            agent_id: agent_id.to_string(),
            run_id: run_id.to_string(),
        };
        let doc = store.call(ns, call).await.ok()??;
        let doc: Value = serde_json::from_str(&doc).ok()?;
        let status = doc.get("status")?.as_str()?;
        matches!(status, "finished" | "error" | "cancelled" | "expired").then(|| status.to_string())
    }
}

enum Handed {
    Given,
    NotHere,
    Taken,
    HolderGone(Box<ApprovalRecord>),
}

impl Held {
    pub fn id(&self) -> &str {
        &self.record.id
    }

    /// Waits until the approval's record says how it ended: a decision (here or through
    /// another daemon), the timeout (denied), or a cancellation (its run ended, callbackd
    /// stops). Meanwhile renews the lease and watches the run.
    pub async fn wait(mut self) -> Outcome {
        let mut rx = self.rx.take().expect("waited once");
        let deadline = tokio::time::Instant::now() + self.timeout;
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut renewed = Instant::now();
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
                _ = tick.tick() => {
                    if renewed.elapsed() >= LEASE / 3 {
                        renewed = Instant::now();
                        self.renew().await;
                    }
                    self.check().await
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

    async fn renew(&self) {
        let until = now_ms() + LEASE.as_millis() as i64;
        let a = &self.approvals.inner;
        if let Err(e) = a.records.renew_approval_leases(&a.owner, until).await {
            tracing::warn!(error = %e, "cannot renew the lease of held approvals");
        }
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

/// `prefix` and 16 random hex digits.
fn new_id(prefix: &str) -> std::io::Result<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(format!(
        "{prefix}{}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    ))
}
