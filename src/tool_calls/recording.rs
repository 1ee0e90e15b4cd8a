//! A tool call's entry in the run API's record ([`Recording`]), from its start (or its hold)
//! to its end.

use std::sync::Arc;

use serde_json::Value;

use super::ToolCallRequest;
use crate::clock::now_ms;
use crate::store::records::{ToolCallStart, ToolOutcome};
use crate::store::{Namespace, RunRecords};
use crate::tools::ToolError;

/// A tool call's entry in the run API's record: started before the tool runs (or before
/// it waits for approval), ended (awaited) before the answer goes back, so the bridge's
/// completion event is never visible before the record says how the call ended. Dropped
/// unfinished (the bridge hung up and the call was aborted), it records the call as
/// cancelled: cut off mid-execution if it had started.
pub(super) struct Recording {
    records: Arc<dyn RunRecords>,
    id: i64,
    started: bool,
    done: bool,
}

impl Recording {
    pub(super) async fn start(
        records: Arc<dyn RunRecords>,
        ns: &Namespace,
        call: &ToolCallRequest,
        run_id: Option<String>,
        held: bool,
    ) -> Option<Recording> {
        let start = ToolCallStart {
            agent_id: call.agent_id.clone(),
            run_id,
            tool_call_id: call.tool_call_id.clone(),
            tool: call.tool_name.clone(),
            started_at_ms: now_ms(),
        };
        match records.tool_call_started(ns, start, held).await {
            Ok(id) => Some(Recording {
                records,
                id,
                started: !held,
                done: false,
            }),
            Err(e) => {
                tracing::warn!(target: "callbackd::tools", error = %e, "cannot record the tool call");
                None
            }
        }
    }

    /// The held call was approved (with `edited` arguments when a person changed them): it
    /// starts now.
    pub(super) async fn resumed(&mut self, edited: Option<Value>) {
        self.started = true;
        if let Err(e) = self.records.tool_call_resumed(self.id, edited).await {
            tracing::warn!(target: "callbackd::tools", error = %e, "cannot record the tool call's start");
        }
    }

    /// The held call was denied, its approval expired or was cancelled: it never ran.
    pub(super) async fn finish_unrun(mut self, outcome: ToolOutcome, why: &ToolError) {
        self.done = true;
        if let Err(e) = self
            .records
            .tool_call_ended(self.id, outcome, false, now_ms(), Some(error_value(why)))
            .await
        {
            tracing::warn!(target: "callbackd::tools", error = %e, "cannot record the tool call's end");
        }
    }

    /// The call ran (or a frontend tool's app answered): its value, or how it failed.
    pub(super) async fn finish(mut self, outcome: &Result<Value, ToolError>) {
        self.done = true;
        let (result, (outcome, cut_off)) = match outcome {
            Ok(value) => (value.clone(), (ToolOutcome::Ok, false)),
            Err(e) => (
                error_value(e),
                match e {
                    ToolError::Timeout { .. } => (ToolOutcome::Timeout, true),
                    ToolError::Panicked { .. } => (ToolOutcome::Error, true),
                    _ => (ToolOutcome::Error, false),
                },
            ),
        };
        if let Err(e) = self
            .records
            .tool_call_ended(self.id, outcome, cut_off, now_ms(), Some(result))
            .await
        {
            tracing::warn!(target: "callbackd::tools", error = %e, "cannot record the tool call's end");
        }
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let (records, id, cut_off) = (self.records.clone(), self.id, self.started);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = records
                    .tool_call_ended(id, ToolOutcome::Cancelled, cut_off, now_ms(), None)
                    .await;
            });
        }
    }
}

/// What callbackd records as the result of a call that failed or never ran: the message the
/// model got, as `{"error": ...}`.
fn error_value(e: &ToolError) -> Value {
    serde_json::json!({ "error": e.to_string() })
}
