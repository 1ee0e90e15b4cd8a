//! Every change of an approval's record: a person's decision ([`Approvals::decide`]), and
//! the ends nobody decided (`expired`, `cancelled`). Each is one conditional update from
//! the states it may leave, so when a decision and a cancellation race exactly one wins,
//! and whoever wins hands the new record to the local holder and announces it once.

use serde_json::Value;

use super::{ApprovalEvent, ApprovalView, Approvals, Handed};
use crate::clock::now_ms;
use crate::store::approvals::{ApprovalChange, ApprovalRecord};
use crate::store::{Namespace, StoreCall, StoreError};

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

impl Approvals {
    /// Decides approval `id` of namespace `ns`.
    pub async fn decide(
        &self,
        ns: &Namespace,
        id: &str,
        decision: Decision,
    ) -> Result<ApprovalRecord, DecideError> {
        let rec = self.read(ns, id).await?;
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
                ns: ns.clone(),
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

    /// Tells the streams (and the log) how an approval ended.
    pub(super) fn resolved(&self, rec: &ApprovalRecord) {
        tracing::info!(approval = %rec.id, decision = %rec.state, by = rec.decided_by.as_deref().unwrap_or("-"), reason = rec.reason.as_deref().unwrap_or(""), "approval resolved");
        // A question's answer is not an edit of the call's arguments.
        let question = rec.tool == crate::tools::builtin::ask_user::NAME;
        let _ = self.inner.events.send(ApprovalEvent::Resolved {
            ns: rec.ns.clone(),
            run_id: rec.run_id.clone(),
            approval_id: rec.id.clone(),
            decision: rec.state.clone(),
            by: rec.decided_by.clone(),
            reason: rec.reason.clone(),
            edited: rec.approved_args.is_some() && !question,
            question: question.then(|| {
                rec.approved_args
                    .as_ref()
                    .filter(|_| rec.state == "approved")
                    .and_then(|a| a.get("answer"))
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_string)
            }),
        });
    }

    /// Ends pending approval `id` without a person (`expired`, `cancelled`), or (from
    /// `approved`) one whose call can no longer run. The record after it, if it changed.
    pub(super) async fn end(
        &self,
        ns: &Namespace,
        id: &str,
        state: &'static str,
        reason: String,
        from: &'static [&'static str],
    ) -> Option<ApprovalRecord> {
        let change = ApprovalChange {
            ns: ns.clone(),
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
    pub(super) async fn unrun(
        &self,
        rec: &ApprovalRecord,
        reason: String,
    ) -> Option<ApprovalRecord> {
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
    /// (elsewhere, by the notification or its next reading of the row). Whether it was
    /// pending.
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
    pub(super) async fn run_ended(
        &self,
        ns: &Namespace,
        agent_id: &str,
        run_id: &str,
    ) -> Option<String> {
        let store = self.inner.store.as_ref()?;
        let call = StoreCall::RunsGet {
            agent_id: agent_id.to_string(),
            run_id: run_id.to_string(),
        };
        let doc = store.call(ns, call).await.ok()??;
        let doc: Value = serde_json::from_str(&doc).ok()?;
        let status = doc.get("status")?.as_str()?;
        let status = crate::run::RunStatus::parse(status)?;
        status.is_terminal().then(|| status.to_string())
    }
}
