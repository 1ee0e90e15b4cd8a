//! A call its tool's policy holds (or an `ask_user` question) waits until its approval's
//! record says how it ended (`approvals`): run, with the arguments a person edited, or not
//! run, with the error the model gets.

use serde_json::Value;

use crate::approvals::{Approvals, HoldRequest, Outcome};
use crate::store::records::ToolOutcome;
use crate::store::Namespace;
use crate::tools::registry::RegisteredTool;
use crate::tools::ToolError;

/// How a held call's wait ended for the tool call.
pub(super) enum Held {
    /// Run it (with the arguments a person edited, if any).
    Run(Option<Value>),
    /// Not run: the error the model gets, and how the record ends.
    NotRun(ToolError, ToolOutcome),
}

/// The call to hold.
pub(super) struct HeldCall<'a> {
    pub ns: &'a Namespace,
    pub tool_name: &'a str,
    pub agent_id: &'a str,
    pub tool_call_id: Option<String>,
    pub args: &'a Value,
    pub run_id: Option<String>,
    pub tool: &'a RegisteredTool,
}

impl HeldCall<'_> {
    /// Holds the call until a person decides, its time runs out or it is cancelled; without
    /// `approvals` (or when the approval cannot be recorded) it is refused, not run.
    pub(super) async fn wait_for_approval(self, approvals: Option<&Approvals>) -> Held {
        let Some(approvals) = approvals else {
            return Held::NotRun(
                ToolError::failed(
                    "this call needs a person's approval, and approvals are not available here",
                ),
                ToolOutcome::Denied,
            );
        };
        let tool_name = self.tool_name;
        let request = HoldRequest {
            ns: self.ns,
            agent_id: self.agent_id,
            run_id: self.run_id,
            tool: tool_name,
            tool_call_id: self.tool_call_id,
            args: self.args,
            timeout: self.tool.approval_timeout(),
            confirm: self.tool.confirm(),
        };
        let held = match approvals.hold(request).await {
            Ok(held) => held,
            Err(e) => {
                tracing::error!(target: "callbackd::tools", error = %e, "cannot record an approval");
                return Held::NotRun(
                    ToolError::failed(
                        "this call needs a person's approval, and it could not be recorded; not run",
                    ),
                    ToolOutcome::Denied,
                );
            }
        };
        match held.wait().await {
            Outcome::Approved { by, args } => {
                tracing::info!(target: "callbackd::tools", tool = %tool_name, %by, edited = args.is_some(), "approved");
                Held::Run(args)
            }
            Outcome::Denied { by, reason } => Held::NotRun(
                ToolError::failed(format!(
                    "a person denied this call ({by}){}; it was not run",
                    reason.map(|r| format!(": {r}")).unwrap_or_default()
                )),
                ToolOutcome::Denied,
            ),
            Outcome::Expired { after } => Held::NotRun(
                ToolError::failed(format!(
                    "nobody approved this call within {} s, so it was denied and not run",
                    after.as_secs()
                )),
                ToolOutcome::Expired,
            ),
            Outcome::Cancelled { reason } => Held::NotRun(
                ToolError::failed(format!(
                    "this call waited for a person's approval and was cancelled ({reason}); it was \
                     not run"
                )),
                ToolOutcome::Cancelled,
            ),
        }
    }
}
