//! `ask_user`: the model asks the person a question and gets their answer as the result.
//! Every call is held like an approval (issue 25): the run's streams show a `question`
//! event, and `POST /v1/runs/{run_id}/resume` `{question_id, answer}` answers it. The
//! answer reaches the tool as the `answer` argument, filled in by callbackd (whatever the
//! model put there is replaced); unanswered in time, the call is denied like an approval.

use serde_json::{json, Value};

use crate::tools::{BoxFuture, Tool, ToolContext, ToolError};

pub const NAME: &str = "ask_user";

/// The `ask_user` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct AskUser;

impl Tool for AskUser {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        "Asks the person running this agent a question and returns their answer. Use it when \
         you need a decision or information only they have; offer options when the choices \
         are known."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "question": {"type": "string", "minLength": 1, "description": "The question, in full."},
                "options": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Answers to offer as choices (the person may still write their own)."
                },
                "answer": {"type": "string", "description": "Filled in by callbackd with the person's answer; leave it out."}
            },
            "required": ["question"],
            "additionalProperties": false
        })
    }

    fn call(&self, args: Value, _ctx: ToolContext) -> BoxFuture<'_, Result<Value, ToolError>> {
        Box::pin(async move {
            match args.get("answer").and_then(Value::as_str) {
                Some(answer) => Ok(json!({ "answer": answer })),
                None => Err(ToolError::failed(
                    "the question was not answered (answer it with POST /v1/runs/{run_id}/resume)",
                )),
            }
        })
    }
}
