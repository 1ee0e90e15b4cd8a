//! `CallCustomTool` of an AG-UI app's frontend tool (`tools::frontend`): callbackd has no
//! code for it, so the call waits for the app's result (its text), or fails for the model
//! once `ask_user`'s approval timeout passed (a frontend tool is a question to the app).

use serde_json::Value;

use super::RpcState;
use crate::store::Namespace;
use crate::tools::frontend::PendingCall;
use crate::tools::ToolError;

/// Holds the call until the app answers; its result value, or the error the model gets.
pub(super) async fn wait(
    state: &RpcState,
    ns: &Namespace,
    agent_id: String,
    tool: String,
    tool_call_id: Option<String>,
    args: Value,
    run_id: Option<String>,
) -> Result<Value, ToolError> {
    let Some(tool_call_id) = tool_call_id else {
        return Err(ToolError::failed(format!(
            "frontend tool {tool} needs a toolCallId to be answered by the app; none was sent"
        )));
    };
    let timeout = state
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
    let text = state.tools.frontend().hold(ns, call, timeout).await?;
    Ok(Value::String(text))
}
