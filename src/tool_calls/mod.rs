//! One custom tool call the bridge sends, from the namespace's allowlist to the answer the
//! model gets: [`ToolCalls::call`]. The protocol handler (`rpc::tools`) decodes the request,
//! calls this, and encodes and logs what it says.
//!
//! In order: an AG-UI app's frontend tool is held for the app's result ([`frontend`]); any
//! other tool outside the registry or the namespace's allowlist is unknown
//! ([`ToolCallError::UnknownTool`]); the call is recorded for the run API ([`recording`]);
//! a call its tool's policy holds (and every `ask_user` question) waits for a person
//! ([`hold`]); then the tool runs, bounded by its timeout (`tools::invoke`). Whatever happens
//! inside the call is an error *result* for the model, never an error of the call.
//!
//! Why a module of its own, not a file of `tools`: the call puts the tools together with
//! what sits beside and above them, the held calls of `approvals` (which knows the
//! `ask_user` tool, so `tools` cannot know it back without a circle) and the allowlists of
//! `namespaces` (a floor above `tools`). It sits on the floor of `namespaces`, below the
//! protocol handlers that call it.

mod frontend;
mod hold;
mod recording;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::approvals::Approvals;
use crate::namespaces::Namespaces;
use crate::store::{Namespace, RunRecords, Store, StoreCall};
use crate::tools::invoke::{invoke, Call};
use crate::tools::service::ToolService;
use crate::tools::{error_result, result_of, ToolError};
use hold::Held;
use recording::Recording;

/// What a tool call needs: the tools, where the call is recorded and held, and whom each
/// namespace may call.
#[derive(Clone)]
pub struct ToolCalls {
    pub store: Arc<dyn Store>,
    pub tools: ToolService,
    /// Where tool calls are recorded for the run API (`None`: not recorded).
    pub records: Option<Arc<dyn RunRecords>>,
    /// Where held calls wait for a decision (`None`: a held call is refused).
    pub approvals: Option<Approvals>,
    /// The namespaces in force (tool allowlists).
    pub namespaces: Namespaces,
}

/// A call as the bridge sent it.
#[derive(Debug, Clone)]
pub struct ToolCallRequest {
    pub tool_name: String,
    pub agent_id: String,
    pub tool_call_id: Option<String>,
    /// A JSON object.
    pub args: Value,
    /// The client's `connect-timeout-ms`, if it sent one.
    pub timeout: Option<Duration>,
}

/// How a call ended, for the model and for the log.
#[derive(Debug, Clone)]
pub struct ToolAnswer {
    /// The result the model gets (`tools::result_of`, or an error result).
    pub result: Value,
    /// `ok`, the tool's error (`tools::ToolError::outcome`), or how a held call ended
    /// without running (`denied`, `expired`, `cancelled`): the same word as every view.
    pub outcome: &'static str,
    /// The error to log. `None` when the message quotes the arguments, which are never
    /// logged.
    pub error: Option<String>,
}

/// Why a call could not be served at all (each becomes a Connect error in `rpc::tools`).
#[derive(Debug, thiserror::Error)]
pub enum ToolCallError {
    /// No tool of that name that the namespace may call (`not_found`).
    #[error(
        "unknown custom tool {tool:?}: this daemon serves {}",
        if served.is_empty() { "no tools".to_string() } else { served.join(", ") }
    )]
    UnknownTool {
        tool: String,
        /// The tools the namespace may call, in the registry's order.
        served: Vec<String>,
    },
    /// The task serving the call failed (`internal`).
    #[error("internal error: the tool call failed")]
    Failed,
}

impl ToolCalls {
    /// Serves one call. On the runtime the daemon was started on, once set
    /// (`ToolService::run_on`): a tool that blocks its thread then stalls no connection
    /// thread. The call is cancelled when the returned future is dropped (the bridge hung
    /// up), wherever it runs.
    pub async fn call(
        &self,
        ns: Namespace,
        request: ToolCallRequest,
    ) -> Result<ToolAnswer, ToolCallError> {
        let Some(runtime) = self.tools.runtime() else {
            return self.serve(ns, request).await;
        };
        let this = self.clone();
        match AbortOnDrop(runtime.spawn(async move { this.serve(ns, request).await })).await {
            Ok(answer) => answer,
            Err(e) => {
                tracing::error!(target: "callbackd::tools", error = %e, "a tool call's task failed");
                Err(ToolCallError::Failed)
            }
        }
    }

    async fn serve(
        &self,
        ns: Namespace,
        call: ToolCallRequest,
    ) -> Result<ToolAnswer, ToolCallError> {
        if self
            .tools
            .frontend()
            .is_frontend(&ns, &call.agent_id, &call.tool_name)
        {
            return Ok(self.frontend_call(ns, call).await);
        }
        let registry = self.tools.registry();
        // A tool outside the namespace's allowlist does not exist for it: the same answer, and
        // the list names only the tools it may call.
        let allowed = |name: &str| self.namespaces.allows_tool(&ns, name);
        let Some(tool) = registry
            .get(&call.tool_name)
            .filter(|_| allowed(&call.tool_name))
        else {
            return Err(ToolCallError::UnknownTool {
                tool: call.tool_name,
                served: registry
                    .names()
                    .filter(|n| allowed(n))
                    .map(str::to_string)
                    .collect(),
            });
        };
        // A question to the person always waits for their answer.
        let held = tool.approval().holds(&call.args)
            || call.tool_name == crate::tools::builtin::ask_user::NAME;
        let run_id = match (&self.records, held) {
            (None, false) => None,
            _ => self.active_run(&ns, &call.agent_id).await,
        };
        let mut record = match &self.records {
            Some(records) => {
                Recording::start(records.clone(), &ns, &call, run_id.clone(), held).await
            }
            None => None,
        };
        let mut args = call.args;
        if held {
            let wait = hold::HeldCall {
                ns: &ns,
                tool_name: &call.tool_name,
                agent_id: &call.agent_id,
                tool_call_id: call.tool_call_id.clone(),
                args: &args,
                run_id,
                tool: &tool,
            };
            match wait.wait_for_approval(self.approvals.as_ref()).await {
                Held::Run(edited) => {
                    if let Some(r) = record.as_mut() {
                        r.resumed(edited.clone()).await;
                    }
                    if let Some(edited) = edited {
                        args = edited;
                    }
                }
                Held::NotRun(error, outcome) => {
                    if let Some(r) = record.take() {
                        r.finish_unrun(outcome, &error).await;
                    }
                    return Ok(ToolAnswer {
                        result: error_result(&error),
                        // `denied`, `expired` or `cancelled`: the same word as every view.
                        outcome: outcome.as_str(),
                        error: Some(error.to_string()),
                    });
                }
            }
        }
        let outcome = invoke(
            &tool,
            args,
            Call {
                agent_id: call.agent_id,
                tool_call_id: call.tool_call_id,
                namespace: ns,
                timeout: call.timeout,
            },
        )
        .await;
        if let Some(record) = record {
            record.finish(&outcome).await;
        }
        Ok(match outcome {
            Ok(value) => ToolAnswer::ok(value),
            Err(e) => ToolAnswer {
                result: error_result(&e),
                outcome: e.outcome(),
                // Argument errors quote the arguments, which are never logged.
                error: (!matches!(e, ToolError::InvalidArgs(_))).then(|| e.to_string()),
            },
        })
    }

    /// The agent's active run: a tool call names only the agent.
    async fn active_run(&self, ns: &Namespace, agent_id: &str) -> Option<String> {
        let doc = self
            .store
            .call(
                ns,
                StoreCall::AgentsGet {
                    agent_id: agent_id.to_string(),
                },
            )
            .await
            .ok()??;
        serde_json::from_str::<Value>(&doc).ok().and_then(|d| {
            d.get("activeRunId")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
    }
}

impl ToolAnswer {
    fn ok(value: Value) -> Self {
        ToolAnswer {
            result: result_of(value),
            outcome: "ok",
            error: None,
        }
    }
}

/// A spawned task, aborted when whoever awaits it goes away (the bridge hung up and hyper
/// dropped the request): the tool call is then cancelled as if it ran in the request's task.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T> std::future::Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::ToolCallError;

    #[test]
    fn an_unknown_tool_is_named_with_the_tools_the_namespace_may_call() {
        let unknown = |served: &[&str]| ToolCallError::UnknownTool {
            tool: "deploy".into(),
            served: served.iter().map(|s| s.to_string()).collect(),
        };
        assert_eq!(
            unknown(&["echo", "memory"]).to_string(),
            "unknown custom tool \"deploy\": this daemon serves echo, memory"
        );
        assert_eq!(
            unknown(&[]).to_string(),
            "unknown custom tool \"deploy\": this daemon serves no tools"
        );
    }
}
