//! A call of an AG-UI app's frontend tool (`tools::frontend`): callbackd has no code for it,
//! so the call waits for the app's result (its text), or fails for the model once
//! `ask_user`'s approval timeout passed (a frontend tool is a question to the app). Recorded
//! like a held call.

use serde_json::Value;

use super::recording::Recording;
use super::{ToolAnswer, ToolCallRequest, ToolCalls};
use crate::store::Namespace;
use crate::tools::frontend::PendingCall;
use crate::tools::{error_result, ToolError};

impl ToolCalls {
    pub(super) async fn frontend_call(&self, ns: Namespace, call: ToolCallRequest) -> ToolAnswer {
        let run_id = self.active_run(&ns, &call.agent_id).await;
        let mut record = match &self.records {
            Some(records) => {
                Recording::start(records.clone(), &ns, &call, run_id.clone(), true).await
            }
            None => None,
        };
        let outcome = self.wait_for_app(&ns, call, run_id).await;
        if let Some(r) = record.as_mut() {
            r.resumed(None).await;
        }
        if let Some(r) = record {
            r.finish(&outcome).await;
        }
        match outcome {
            Ok(value) => ToolAnswer::ok(value),
            Err(e) => ToolAnswer {
                result: error_result(&e),
                outcome: e.outcome(),
                error: Some(e.to_string()),
            },
        }
    }

    /// Holds the call until the app answers; its result value, or the error the model gets.
    async fn wait_for_app(
        &self,
        ns: &Namespace,
        call: ToolCallRequest,
        run_id: Option<String>,
    ) -> Result<Value, ToolError> {
        let ToolCallRequest {
            tool_name: tool,
            agent_id,
            tool_call_id,
            args,
            ..
        } = call;
        let Some(tool_call_id) = tool_call_id else {
            return Err(ToolError::failed(format!(
                "frontend tool {tool} needs a toolCallId to be answered by the app; none was sent"
            )));
        };
        let timeout = self
            .tools
            .registry()
            .get(crate::tools::builtin::ask_user::NAME)
            .map_or(crate::tools::approval::DEFAULT_TIMEOUT, |t| {
                t.approval_timeout()
            });
        let call = PendingCall {
            tool_call_id,
            agent_id,
            run_id,
            tool,
            args,
        };
        let text = self.tools.frontend().hold(ns, call, timeout).await?;
        Ok(Value::String(text))
    }
}
