//! `echo`: returns its arguments unchanged, whatever they hold (nested, unicode, large),
//! so a user can check the path from the model through the bridge to callbackd and back.

use serde_json::{json, Value};

use crate::tools::{BoxFuture, Tool, ToolContext, ToolError};

pub const NAME: &str = "echo";

/// The `echo` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct Echo;

impl Tool for Echo {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        "Diagnostic tool: returns the JSON object it is called with, unchanged."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "description": "Any JSON object; it is returned as is.",
            "additionalProperties": true
        })
    }

    fn call(&self, args: Value, _ctx: ToolContext) -> BoxFuture<'_, Result<Value, ToolError>> {
        Box::pin(async move { Ok(args) })
    }
}
