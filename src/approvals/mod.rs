//! Human approval of tool calls (issue 15): a call whose policy (`tools::approval`) holds it waits, recorded
//! as a pending approval, until a person decides over the run API
//! (`POST /v1/approvals/{id}`), its time runs out (denied), or the bridge hangs up
//! (cancelled). Every stream of the call's run shows the pending approval
//! (`approval_required`, on every (re)connect while it is pending) and its decision
//! (`approval_resolved`). Neither is a numbered event: the run's numbered events are the
//! bridge's own log, and an approval is callbackd's state beside it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{broadcast, oneshot};

use crate::clock::{now_ms, rfc3339_ms};
use crate::store::approvals::{ApprovalRecord, ApprovalRecords};
use crate::store::{Namespace, StoreError};

/// An approval as the API and the stream show it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ApprovalView {
    pub id: String,
    pub tool: String,
    pub tool_call_id: Option<String>,
    pub args: Value,
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
        approval: ApprovalView,
    },
    Resolved {
        ns: Namespace,
        run_id: Option<String>,
        approval_id: String,
        decision: String,
        by: Option<String>,
        reason: Option<String>,
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

/// How a held call's wait ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Approved {
        by: String,
    },
    Denied {
        by: String,
        reason: Option<String>,
    },
    /// No decision in time: denied.
    Expired {
        after: Duration,
    },
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

/// A person's decision, as a held call receives it: approved?, by whom, why.
type Verdict = (bool, String, Option<String>);
type Waiter = oneshot::Sender<Verdict>;

/// The approvals of the daemon: their records, the calls waiting on them, and the
/// notifications the streams follow.
#[derive(Clone)]
pub struct Approvals {
    inner: Arc<Inner>,
}

struct Inner {
    records: Arc<dyn ApprovalRecords>,
    waiting: Mutex<HashMap<String, Waiter>>,
    events: broadcast::Sender<ApprovalEvent>,
}

/// A held call, waiting. Dropped before its decision (the bridge hung up), it records the
/// approval as cancelled.
pub struct Held {
    approvals: Approvals,
    record: ApprovalRecord,
    rx: Option<oneshot::Receiver<Verdict>>,
    timeout: Duration,
    done: bool,
}

impl Approvals {
    pub fn new(records: Arc<dyn ApprovalRecords>) -> Self {
        Approvals {
            inner: Arc::new(Inner {
                records,
                waiting: Mutex::default(),
                events: broadcast::channel(256).0,
            }),
        }
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
            id: new_id().map_err(|e| StoreError::Internal(e.to_string()))?,
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
        };
        let (tx, rx) = oneshot::channel();
        self.lock().insert(record.id.clone(), tx);
        if let Err(e) = self.inner.records.insert_approval(record.clone()).await {
            self.lock().remove(&record.id);
            return Err(e);
        }
        tracing::info!(approval = %record.id, tool, agent_id, "a tool call waits for approval");
        let _ = self.inner.events.send(ApprovalEvent::Required {
            ns: ns.clone(),
            run_id: record.run_id.clone(),
            approval: ApprovalView::from(&record),
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

    /// Decides approval `id` of namespace `ns`: `approve`, by `by`, for `reason`.
    pub async fn decide(
        &self,
        ns: &Namespace,
        id: &str,
        approve: bool,
        by: &str,
        reason: Option<String>,
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
        let state = if approve { "approved" } else { "denied" };
        let changed = self
            .inner
            .records
            .decide_approval(id, state, Some(by.to_string()), reason.clone(), now_ms())
            .await?;
        let rec = self
            .inner
            .records
            .approval(ns, id)
            .await?
            .ok_or_else(|| DecideError::NotFound(id.to_string()))?;
        if !changed {
            return Err(DecideError::Decided(Box::new(rec)));
        }
        if let Some(tx) = self.lock().remove(id) {
            let _ = tx.send((approve, by.to_string(), reason.clone()));
        }
        self.resolved(&rec);
        Ok(rec)
    }

    fn resolved(&self, rec: &ApprovalRecord) {
        tracing::info!(approval = %rec.id, decision = %rec.state, by = ?rec.decided_by, "approval resolved");
        let _ = self.inner.events.send(ApprovalEvent::Resolved {
            ns: rec.ns.clone(),
            run_id: rec.run_id.clone(),
            approval_id: rec.id.clone(),
            decision: rec.state.clone(),
            by: rec.decided_by.clone(),
            reason: rec.reason.clone(),
        });
    }

    /// Ends a held approval without a person's decision (`expired`, `cancelled`).
    async fn end(&self, rec: &ApprovalRecord, state: &'static str, reason: String) {
        self.lock().remove(&rec.id);
        match self
            .inner
            .records
            .decide_approval(
                &rec.id,
                state,
                Some("callbackd".into()),
                Some(reason),
                now_ms(),
            )
            .await
        {
            Ok(true) => {
                if let Ok(Some(rec)) = self.inner.records.approval(&rec.ns, &rec.id).await {
                    self.resolved(&rec);
                }
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(error = %e, approval = %rec.id, "cannot record the approval's end")
            }
        }
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
}

impl Held {
    pub fn id(&self) -> &str {
        &self.record.id
    }

    /// Waits for the decision, or the timeout (which denies).
    pub async fn wait(mut self) -> Outcome {
        let rx = self.rx.take().expect("waited once");
        let outcome = match tokio::time::timeout(self.timeout, rx).await {
            Ok(Ok((true, by, _))) => Outcome::Approved { by },
            Ok(Ok((false, by, reason))) => Outcome::Denied { by, reason },
            Ok(Err(_)) | Err(_) => {
                let reason = format!("no decision within {} ms", self.timeout.as_millis());
                self.approvals.end(&self.record, "expired", reason).await;
                Outcome::Expired {
                    after: self.timeout,
                }
            }
        };
        self.done = true;
        outcome
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let (approvals, record) = (self.approvals.clone(), self.record.clone());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                approvals
                    .end(
                        &record,
                        "cancelled",
                        "the bridge dropped the tool call".into(),
                    )
                    .await;
            });
        }
    }
}

/// `appr_` and 16 random hex digits.
fn new_id() -> std::io::Result<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(format!(
        "appr_{}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    ))
}
