//! Ending a run that no bridge will finish: its bridge stopped or crashed (a supervised
//! bridge's runs, `orphans`), or a cancel reached a bridge that does not know it.
//!
//! callbackd writes the end the way the bridge would have (callback contract §3.2, §3.6):
//! a stored `status` event, so every stream of the run, live or replayed, ends with a
//! terminal event; the run document's `status` and `endedAt` (and `error`); the session's
//! `activeRunId` cleared, so it takes a new message, forks and deletes again. The run's
//! held calls are cancelled with the same reason, just before the document says the run
//! ended: the store announces that end (`StoreNotice::RunEnded`), and its listeners (the
//! traces, the metrics, the approvals' own cancellation, which then finds nothing pending)
//! hear it as they hear the bridge's. Nothing the run's tools did is undone or run again.
//!
//! The status: `cancelled` when a person asked for it (a cancel), `error` when the bridge
//! went away (`[unavailable] <reason>`, which the run API shows as the run's problem).

use std::sync::Arc;

use serde_json::{json, Value};

use crate::approvals::Approvals;
use crate::clock::now_ms;
use crate::run::RunStatus;
use crate::store::{Namespace, RunRecords, Store, StoreCall, StoreError};

/// What ends a run, and who is told.
pub(crate) struct RunEnder {
    pub store: Arc<dyn Store>,
    pub records: Arc<dyn RunRecords>,
    pub approvals: Approvals,
}

/// How [`RunEnder::end`] left a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// callbackd ended it now, with this status.
    Now(RunStatus),
    /// It had already ended (its document, or its stored last event, says so): this status
    /// is the one that counts, and nothing was written.
    Already(RunStatus),
    /// There is no such run.
    Unknown,
}

impl RunEnder {
    /// Ends run `run_id` of session `agent_id` with `status` (`error` or `cancelled`) for
    /// `reason`, unless it has ended already.
    pub(crate) async fn end(
        &self,
        ns: &Namespace,
        agent_id: &str,
        run_id: &str,
        status: RunStatus,
        reason: &str,
    ) -> Result<Ended, StoreError> {
        let Some(mut doc) = self.run_doc(ns, agent_id, run_id).await? else {
            return Ok(Ended::Unknown);
        };
        if let Some(done) = RunStatus::of_doc(&doc).filter(|s| s.is_terminal()) {
            return Ok(Ended::Already(done));
        }
        let error = format!("[unavailable] {reason}");
        // The bridge may have stored its end and stopped before it updated the document:
        // that end is the one that counts, and its event is already there.
        let stored = self.stored_end(ns, run_id).await?;
        let status = match stored {
            Some(s) => s,
            None => {
                let mut message = json!({"type": "status", "status": status.event_str()});
                if status == RunStatus::Error {
                    message["message"] = error.clone().into();
                }
                let payload = json!({"schemaVersion": 1, "type": "sdk_message",
                                     "agentId": agent_id, "runId": run_id, "message": message});
                let input = json!({"runId": run_id, "eventType": "run_stream_event",
                                   "payload": payload});
                self.call(ns, "runEvents", "append", input).await?;
                status
            }
        };
        // Read again just before the write: a bridge that is alive after all and ended it
        // meanwhile keeps its own end.
        if let Some(fresh) = self.run_doc(ns, agent_id, run_id).await? {
            if let Some(done) = RunStatus::of_doc(&fresh).filter(|s| s.is_terminal()) {
                return Ok(Ended::Already(done));
            }
            doc = fresh;
        }
        // The reason is this one, not the generic one the run's end would give them.
        let n = self.approvals.cancel_run(ns, run_id, reason).await;
        let now = now_ms();
        doc["status"] = status.as_str().into();
        doc["endedAt"] = now.into();
        doc["updatedAt"] = now.into();
        if status == RunStatus::Error && doc.get("error").is_none_or(Value::is_null) {
            doc["error"] = error.into();
        }
        self.call(ns, "runs", "update", json!({ "run": doc }))
            .await?;
        self.release_session(ns, agent_id, run_id, status).await?;
        tracing::warn!(
            namespace = ns.as_str(),
            run_id,
            status = %status,
            approvals = n,
            "callbackd ended the run: {reason}"
        );
        Ok(match stored {
            Some(s) => Ended::Already(s),
            None => Ended::Now(status),
        })
    }

    /// Ends each of `runs` (`(namespace, run id, session id)`, a bridge that is gone) with
    /// `error` for `reason`; whether every one is now ended.
    pub(crate) async fn end_all(&self, runs: &[(Namespace, String, String)], reason: &str) -> bool {
        let mut all = true;
        for (ns, run_id, agent_id) in runs {
            if let Err(e) = self
                .end(ns, agent_id, run_id, RunStatus::Error, reason)
                .await
            {
                tracing::error!(namespace = ns.as_str(), run_id, error = %e, "cannot end the run");
                all = false;
            }
        }
        all
    }

    /// At start: ends the runs of daemons on this data directory `dir` that died with their
    /// bridge's runs unfinished (`runs_file::stale`). A file goes once all of its runs ended.
    pub(crate) async fn end_stale(&self, dir: &std::path::Path) {
        for (path, pid, claimed) in super::runs_file::stale(dir) {
            let ns = Namespace::new(&claimed.namespace);
            let runs: Vec<_> = claimed
                .runs
                .iter()
                .map(|(run, agent)| (ns.clone(), run.clone(), agent.clone()))
                .collect();
            let reason = format!(
                "the bridge that ran it stopped: the callbackd (pid {pid}) that supervised it \
                 ended without stopping it"
            );
            if self.end_all(&runs, &reason).await {
                let _ = std::fs::remove_file(&path);
            }
        }
    }

    async fn call(
        &self,
        ns: &Namespace,
        substore: &str,
        method: &str,
        input: Value,
    ) -> Result<Option<String>, StoreError> {
        let call = StoreCall::parse(substore, method, &input.to_string())?;
        self.store.call(ns, call).await
    }

    async fn run_doc(
        &self,
        ns: &Namespace,
        agent_id: &str,
        run_id: &str,
    ) -> Result<Option<Value>, StoreError> {
        let input = json!({"agentId": agent_id, "runId": run_id});
        let text = self.call(ns, "runs", "get", input).await?;
        Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
    }

    /// The status of the run's last stored event, if that is a terminal `status` event.
    async fn stored_end(
        &self,
        ns: &Namespace,
        run_id: &str,
    ) -> Result<Option<RunStatus>, StoreError> {
        let last = self.records.last_events(ns, &[run_id.to_string()]).await?;
        let Some(ev) = last.get(run_id) else {
            return Ok(None);
        };
        let ev: Value = serde_json::from_str(ev).unwrap_or_default();
        if ev.pointer("/payload/message/type").and_then(Value::as_str) != Some("status") {
            return Ok(None);
        }
        Ok(ev
            .pointer("/payload/message/status")
            .and_then(Value::as_str)
            .and_then(RunStatus::parse_event)
            .filter(|s| s.is_terminal()))
    }

    /// The session no longer has the run active: it takes a new message again (the bridge
    /// leaves `idle` after a good end and `error` after a failed one).
    async fn release_session(
        &self,
        ns: &Namespace,
        agent_id: &str,
        run_id: &str,
        status: RunStatus,
    ) -> Result<(), StoreError> {
        let Some(text) = self
            .call(ns, "agents", "get", json!({ "agentId": agent_id }))
            .await?
        else {
            return Ok(());
        };
        let mut agent: Value = serde_json::from_str(&text).unwrap_or_default();
        if agent.get("activeRunId").and_then(Value::as_str) != Some(run_id) {
            return Ok(());
        }
        agent["activeRunId"] = Value::Null;
        agent["status"] = if status == RunStatus::Error {
            "error"
        } else {
            "idle"
        }
        .into();
        agent["updatedAt"] = now_ms().into();
        self.call(ns, "agents", "update", json!({ "agent": agent }))
            .await?;
        Ok(())
    }
}
