//! One tool call, bounded and isolated: validate the arguments, take a concurrency slot,
//! run the tool until its deadline with panics caught, then shape and check the result.
//!
//! The call runs inside the future of the request that carries it (no task is spawned), so
//! when hyper drops that future because the bridge closed the connection, the tool's future
//! is dropped with it: its `.await` points stop, a command tool's process group is killed,
//! and the context's cancellation token fires for any work the tool started on the side.
//!
//! Concurrency: each tool has `max_concurrency` slots. A call that finds them all taken
//! waits for one, but only until its own deadline; then it gets a "busy" error result. The
//! deadline covers the wait and the run together, so a call never takes longer than its
//! timeout, queued or not, and a burst of calls is served in order instead of failing at
//! once.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures_util::FutureExt;
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::registry::RegisteredTool;
#[cfg(doc)]
use super::result_of;
use super::{ToolContext, ToolError};
use crate::store::Namespace;

/// Who is calling, as the request says.
#[derive(Debug, Clone)]
pub struct Call {
    pub agent_id: String,
    pub tool_call_id: Option<String>,
    pub namespace: Namespace,
    /// The client's `connect-timeout-ms`, if it sent one; the tighter of it and the tool's
    /// own timeout applies.
    pub timeout: Option<Duration>,
}

/// Runs one call of `tool` with `args` (a JSON object). `Ok` is the tool's own value, as it
/// returned it (callbackd records that; [`result_of`] shapes what the model gets); `Err`
/// becomes an error result.
pub async fn invoke(tool: &RegisteredTool, args: Value, call: Call) -> Result<Value, ToolError> {
    let name = tool.name();
    let budget = call
        .timeout
        .map_or(tool.timeout(), |t| t.min(tool.timeout()));
    let ms = budget.as_millis() as u64;
    let deadline = Instant::now() + budget;

    if let Err(violations) = tool.input.validate(&args) {
        return Err(ToolError::InvalidArgs(format!(
            "invalid arguments for tool {name:?}: {violations}. Fix the arguments and call \
             the tool again."
        )));
    }

    let _slot = match tokio::time::timeout_at(deadline, tool.slots.clone().acquire_owned()).await {
        Ok(Ok(permit)) => permit,
        Ok(Err(_closed)) => return Err(ToolError::failed(format!("tool {name:?} is shut down"))),
        Err(_) => {
            return Err(ToolError::Busy {
                tool: name.to_string(),
                limit: tool.max_concurrency(),
                ms,
            })
        }
    };

    let cancellation = CancellationToken::new();
    // Fires the token if this future is dropped (client gone) or returns unfinished.
    let guard = cancellation.clone().drop_guard();
    let ctx = ToolContext {
        agent_id: call.agent_id,
        tool_call_id: call.tool_call_id,
        deadline,
        cancellation,
        namespace: call.namespace,
    };

    let started = std::panic::catch_unwind(AssertUnwindSafe(|| tool.tool().call(args, ctx)));
    let outcome = match started {
        Err(panic) => Err(panicked(name, &*panic)),
        Ok(fut) => {
            match tokio::time::timeout_at(deadline, AssertUnwindSafe(fut).catch_unwind()).await {
                Err(_) => Err(ToolError::Timeout {
                    tool: name.to_string(),
                    ms,
                }),
                Ok(Err(panic)) => Err(panicked(name, &*panic)),
                Ok(Ok(result)) => result,
            }
        }
    };
    let value = outcome?;
    // Finished: work the tool left running on purpose is not cancelled.
    guard.disarm();
    if let Some(schema) = &tool.output {
        check_output(name, schema, &value)?;
    }
    Ok(value)
}

fn panicked(tool: &str, payload: &(dyn Any + Send)) -> ToolError {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic payload".into());
    tracing::error!(target: "callbackd::tools", tool, panic = %message, "tool panicked");
    ToolError::Panicked {
        tool: tool.to_string(),
    }
}

/// Checks a result against the tool's output schema. An MCP result (an object with a
/// `content` array) is checked by its `structuredContent`; an error result is not checked.
fn check_output(
    tool: &str,
    schema: &super::schema::Schema,
    value: &Value,
) -> Result<(), ToolError> {
    let invalid = |reason: String| ToolError::InvalidOutput {
        tool: tool.to_string(),
        reason,
    };
    let checked = match value {
        Value::Object(obj) if obj.get("content").is_some_and(Value::is_array) => {
            if obj.get("isError") == Some(&Value::Bool(true)) {
                return Ok(());
            }
            match obj.get("structuredContent") {
                Some(structured) => structured,
                None => {
                    return Err(invalid(
                        "it declares an output schema but its result has no structuredContent"
                            .into(),
                    ))
                }
            }
        }
        other => other,
    };
    schema.validate(checked).map_err(|v| invalid(v.to_string()))
}
