//! Custom tools: the plugin API ([`Tool`], [`ToolContext`], [`ToolError`]), the
//! [`ToolRegistry`] the daemon dispatches `CallCustomTool` to, and the tools that ship with it.
//!
//! - [`registry`]: tools by name (duplicates rejected), each with its compiled schemas and
//!   limits; the `customTools` declarations for the bridge.
//! - [`invoke`]: one call, bounded: argument validation, concurrency limit, timeout,
//!   cancellation, panic isolation, result shaping, output validation.
//! - [`schema`]: the JSON Schema subset arguments and outputs are validated against.
//! - [`command`]: tools declared in TOML that run a program.
//! - [`builtin`]: `echo` and `memory`.
//!
//! A tool failure is never an RPC failure: whatever goes wrong inside a call (bad arguments,
//! an error, a timeout, a panic) reaches the model as an error result
//! `{"content":[{"type":"text","text":…}],"isError":true}` it can read and act on
//! (contract §4.3). Only a request the daemon cannot route is a Connect error.

pub mod approval;
pub mod builtin;
pub mod command;
pub mod frontend;
pub mod invoke;
pub mod registry;
pub mod schema;
pub mod service;

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::store::Namespace;

pub use registry::{RegistryError, ToolRegistry};

/// The future a [`Tool::call`] returns (boxed, so tools can be called through `dyn Tool`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A custom tool the model can call.
///
/// `call` runs inside the request that carries the call: when the call times out or the
/// bridge drops the connection, its future is dropped, so cancellation happens at the next
/// `.await`. A tool that spawns work of its own should stop it when
/// [`ToolContext::cancelled`] fires. A panic inside `call` becomes an error result; the
/// daemon keeps serving.
///
/// ```
/// use callbackd::tools::{BoxFuture, Tool, ToolContext, ToolError};
/// use serde_json::{json, Value};
///
/// struct Shout;
///
/// impl Tool for Shout {
///     fn name(&self) -> &str { "shout" }
///     fn description(&self) -> &str { "Upper-cases a text" }
///     fn input_schema(&self) -> Value {
///         json!({"type": "object", "properties": {"text": {"type": "string"}},
///                "required": ["text"], "additionalProperties": false})
///     }
///     fn call(&self, args: Value, _ctx: ToolContext) -> BoxFuture<'_, Result<Value, ToolError>> {
///         Box::pin(async move { Ok(json!(args["text"].as_str().unwrap_or("").to_uppercase())) })
///     }
/// }
/// ```
pub trait Tool: Send + Sync + 'static {
    /// The name the model calls the tool by: 1 to 64 of `A-Z a-z 0-9 _ -`, unique in the
    /// registry.
    fn name(&self) -> &str;

    /// What the tool does, for the model. Empty means none.
    fn description(&self) -> &str {
        ""
    }

    /// The JSON Schema of the arguments (always an object). Arguments are validated against
    /// it before `call` (see [`schema`] for the supported subset), so `call` may rely on it.
    fn input_schema(&self) -> Value {
        serde_json::json!({ "type": "object" })
    }

    /// The JSON Schema of the result, if the tool declares one. A result that does not
    /// match becomes an error result.
    fn output_schema(&self) -> Option<Value> {
        None
    }

    /// Time limit of one call; `None` takes `tools.timeout_ms` from the config. A request's
    /// `connect-timeout-ms`, when tighter, wins.
    fn timeout(&self) -> Option<std::time::Duration> {
        None
    }

    /// Calls of this tool running at once; `None` takes `tools.max_concurrency`.
    fn max_concurrency(&self) -> Option<usize> {
        None
    }

    /// Runs the tool. `args` is a JSON object that matched [`Tool::input_schema`].
    ///
    /// The returned value becomes the result the model sees: an object is passed through
    /// (an MCP result `{"content":[…],"isError":…}` as is, any other object as structured
    /// content); a string becomes a text result; any other value its JSON text.
    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, Result<Value, ToolError>>;
}

/// What a tool knows about the call it is serving. `#[non_exhaustive]`: fields may be
/// added without breaking tools.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ToolContext {
    /// The agent the tools were declared for (sub-agents are not distinguished).
    pub agent_id: String,
    /// The backend's id of this tool call, when the runtime has one. Not stable across the
    /// retries of a failed turn (contract §5.7).
    pub tool_call_id: Option<String>,
    /// When the call is given up on; the call is cancelled at that point.
    pub deadline: Instant,
    /// Cancelled when the call is abandoned: timeout, or the bridge dropped the request.
    pub cancellation: CancellationToken,
    /// The namespace the request's token grants; tools that keep data key it by this.
    pub namespace: Namespace,
}

impl ToolContext {
    /// A context for `agent_id` with the given deadline, in the default namespace (for
    /// calling a tool directly, e.g. in its own tests).
    pub fn new(agent_id: impl Into<String>, deadline: Instant) -> Self {
        ToolContext {
            agent_id: agent_id.into(),
            tool_call_id: None,
            deadline,
            cancellation: CancellationToken::new(),
            namespace: Namespace::default(),
        }
    }

    pub fn with_tool_call_id(mut self, id: impl Into<String>) -> Self {
        self.tool_call_id = Some(id.into());
        self
    }

    pub fn with_namespace(mut self, namespace: Namespace) -> Self {
        self.namespace = namespace;
        self
    }

    /// Resolves when the call is abandoned.
    pub async fn cancelled(&self) {
        self.cancellation.cancelled().await;
    }

    /// Time left until the deadline (zero once it has passed).
    pub fn remaining(&self) -> std::time::Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// Why a tool call failed. Every variant becomes an error result for the model
/// (`isError: true`, the message as text), never a Connect error: the model can read it,
/// fix its arguments or try something else, and the run goes on.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The arguments are wrong; the message says how, so the model can retry.
    #[error("{0}")]
    InvalidArgs(String),
    /// The tool ran and failed.
    #[error("{0}")]
    Failed(String),
    /// The call did not finish within its time limit and was cancelled.
    #[error("tool {tool:?} did not finish within {ms} ms and was cancelled")]
    Timeout { tool: String, ms: u64 },
    /// Every slot of the tool was taken until the call's deadline.
    #[error(
        "tool {tool:?} is busy: {limit} calls of it are already running and none finished \
         within {ms} ms; try again later"
    )]
    Busy { tool: String, limit: usize, ms: u64 },
    /// The tool panicked; the daemon logged the panic and goes on serving.
    #[error("tool {tool:?} failed unexpectedly (it panicked); details are in the callbackd log")]
    Panicked { tool: String },
    /// The tool's result does not match the output schema it declared.
    #[error("tool {tool:?} returned a result that does not match its output schema: {reason}")]
    InvalidOutput { tool: String, reason: String },
}

impl ToolError {
    /// The arguments are wrong: `message` should say exactly what to change.
    pub fn invalid_args(message: impl Into<String>) -> Self {
        ToolError::InvalidArgs(message.into())
    }

    /// The tool failed.
    pub fn failed(message: impl Into<String>) -> Self {
        ToolError::Failed(message.into())
    }

    /// A short label for logs.
    pub fn outcome(&self) -> &'static str {
        match self {
            ToolError::InvalidArgs(_) => "invalid_args",
            ToolError::Failed(_) => "failed",
            ToolError::Timeout { .. } => "timeout",
            ToolError::Busy { .. } => "busy",
            ToolError::Panicked { .. } => "panicked",
            ToolError::InvalidOutput { .. } => "invalid_output",
        }
    }
}

/// The result the model gets for a tool's return value (contract §4.3): objects pass
/// through, a string becomes a text result, anything else its JSON text.
pub fn result_of(value: Value) -> Value {
    match value {
        Value::Object(_) => value,
        Value::String(text) => text_result(&text, false),
        other => text_result(&other.to_string(), false),
    }
}

/// The error result for a failed call.
pub fn error_result(error: &ToolError) -> Value {
    text_result(&error.to_string(), true)
}

fn text_result(text: &str, is_error: bool) -> Value {
    let mut result = serde_json::json!({ "content": [{ "type": "text", "text": text }] });
    if is_error {
        result["isError"] = Value::Bool(true);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn results_are_shaped_as_the_sdk_reads_them() {
        assert_eq!(result_of(json!({"a": 1})), json!({"a": 1}));
        assert_eq!(
            result_of(json!("hi")),
            json!({"content": [{"type": "text", "text": "hi"}]})
        );
        assert_eq!(
            result_of(json!(42)),
            json!({"content": [{"type": "text", "text": "42"}]})
        );
        assert_eq!(
            result_of(json!([1, true, null])),
            json!({"content": [{"type": "text", "text": "[1,true,null]"}]})
        );
        assert_eq!(
            error_result(&ToolError::failed("boom")),
            json!({"content": [{"type": "text", "text": "boom"}], "isError": true})
        );
    }
}
