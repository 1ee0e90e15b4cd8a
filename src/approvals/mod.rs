//! Human approval of tool calls (issues 15 and 25): a call whose policy (`tools::approval`)
//! holds it waits, recorded as a pending approval, until a person decides over the run API
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
//!
//! A pending approval belongs to the daemon that holds its call ([`Approvals::owner`]),
//! which renews a lease on it while it waits ([`lease`]). A decision reaches the holder at
//! once wherever it was made: through this daemon, by handing the new record over
//! ([`decide`]); through another daemon on PostgreSQL, by the `NOTIFY` the change sends
//! ([`wake`]). The holder also re-reads its row every poll interval
//! (`tools.approval_poll_ms`), the slow fallback for another daemon on SQLite or a missed
//! notification ([`held`]).
//!
//! Files, one concept each: [`view`] (the shapes shown), [`decide`] (every change of a
//! record), [`held`] (the waiting call), [`lease`] (ownership across daemons), [`wake`]
//! (notifications from other daemons).

mod decide;
mod held;
mod lease;
mod view;
mod wake;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{broadcast, oneshot, Notify};

use crate::clock::now_ms;
use crate::store::approvals::{ApprovalRecord, ApprovalRecords};
use crate::store::{Namespace, Store, StoreError};

pub use decide::{DecideError, Decision};
pub use held::Held;
pub use lease::LEASE;
pub use view::{ApprovalEvent, ApprovalView, Outcome};

/// A call to hold: what it is and how long it may wait.
#[derive(Debug, Clone)]
pub struct HoldRequest<'a> {
    pub ns: &'a Namespace,
    pub agent_id: &'a str,
    pub run_id: Option<String>,
    pub tool: &'a str,
    pub tool_call_id: Option<String>,
    pub args: &'a Value,
    pub timeout: Duration,
    /// The tool is marked `confirm = true` (the console asks twice).
    pub confirm: bool,
}

/// A held call of this daemon: whom to tell its approval's new record, and what it is.
struct Waiter {
    /// Taken by whoever first learns of the end (a local decision or the holder's own
    /// reading of the row): that one announces it.
    tx: Option<oneshot::Sender<ApprovalRecord>>,
    /// Makes the holder re-read its row now (another daemon changed it).
    wake: Arc<Notify>,
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
    /// Where a held call's run status is read and other daemons' changes are heard (unset:
    /// neither).
    store: Option<Arc<dyn Store>>,
    owner: String,
    poll: Duration,
    waiting: Mutex<HashMap<String, Waiter>>,
    events: broadcast::Sender<ApprovalEvent>,
    /// Set once the daemon stops ([`Approvals::stop`]): the reason every call held from
    /// then on is cancelled with, at once.
    stopping: Mutex<Option<String>>,
}

impl Approvals {
    /// Approvals kept in `records`, whose held calls also end when their run ends (read from
    /// `store`) and re-read their row every `poll` when nothing woke them.
    pub fn with_store(
        records: Arc<dyn ApprovalRecords>,
        store: Option<Arc<dyn Store>>,
        poll: Duration,
    ) -> Self {
        let owner = new_id("own_").unwrap_or_else(|_| format!("own_{}", std::process::id()));
        let inner = Arc::new(Inner {
            records,
            store,
            owner,
            poll: poll.max(Duration::from_millis(10)),
            waiting: Mutex::default(),
            events: broadcast::channel(256).0,
            stopping: Mutex::default(),
        });
        if let Some(store) = &inner.store {
            wake::listen(store.as_ref(), Arc::downgrade(&inner));
        }
        Approvals { inner }
    }

    /// This daemon's id as the owner of the approvals it holds.
    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    /// How many calls this daemon holds waiting for a person, per namespace (questions
    /// included): what `/metrics` reports as `approvals_pending`.
    pub fn held_per_namespace(&self) -> Vec<(String, u64)> {
        let mut out = std::collections::BTreeMap::<String, u64>::new();
        for w in self.lock().values() {
            *out.entry(w.ns.as_str().to_string()).or_default() += 1;
        }
        out.into_iter().collect()
    }

    pub fn subscribe(&self) -> broadcast::Receiver<ApprovalEvent> {
        self.inner.events.subscribe()
    }

    pub fn records(&self) -> &Arc<dyn ApprovalRecords> {
        &self.inner.records
    }

    /// Holds a call: records the pending approval and tells the run's streams.
    pub async fn hold(&self, req: HoldRequest<'_>) -> Result<Held, StoreError> {
        let HoldRequest {
            ns,
            agent_id,
            run_id,
            tool,
            tool_call_id,
            args,
            timeout,
            confirm,
        } = req;
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
            confirm,
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
        let wake = Arc::new(Notify::new());
        self.lock().insert(
            record.id.clone(),
            Waiter {
                tx: Some(tx),
                wake: wake.clone(),
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
        // Checked after the waiter is in the map: a stop that began meanwhile either saw it
        // there or is seen here (cancelling twice is one conditional update that wins once).
        let stopping = self.stopping();
        if let Some(reason) = stopping {
            self.cancel(ns, &record.id, reason).await;
        }
        Ok(Held::new(self.clone(), record, rx, wake, timeout))
    }

    /// Why this daemon is stopping, once it is.
    fn stopping(&self) -> Option<String> {
        self.inner
            .stopping
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The daemon stops: every call it holds is cancelled for `reason` (the bridge gets the
    /// answers now, so its tool calls return and it can stop within its stop timeout), and
    /// so is any call held from now on. Returns how many were cancelled now. Idempotent.
    pub async fn stop(&self, reason: &str) -> usize {
        *self
            .inner
            .stopping
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(reason.to_string());
        self.cancel_held(reason).await
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiter>> {
        self.inner.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands a new record of approval `id` to its local holder, if it is here and nobody
    /// did yet (see [`Handed`]).
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
}

/// What [`Approvals::hand_over`] did with a record.
enum Handed {
    /// The holder has it: the caller announces it.
    Given,
    /// No holder here (another daemon holds it): the caller announces it.
    NotHere,
    /// Someone handed it over already and announced it.
    Taken,
    /// The holder is gone (the bridge dropped the call): the record is given back.
    HolderGone(Box<ApprovalRecord>),
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
