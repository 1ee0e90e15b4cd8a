//! [`Durable`]: the stream events (run-api.md §2) a run's stored events map to, the same
//! for the run API's stream, its pages and run state, AG-UI and the traces; and
//! [`RunInput`], the user message that started a run.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use super::problem::Problem;
#[cfg(doc)]
use super::tool_call::ToolCall;
use super::tool_call::{Decision, QuestionRecord};

/// Bytes of JSON text of a tool call's arguments or result that a stream event carries.
pub const FULL_VALUE_BYTES: usize = 64 * 1024;
use crate::clock::rfc3339_ms;

/// The stream event types of a durable event, and their fields.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Durable {
    RunStarted {
        #[schemars(with = "super::schema::AgentRef")]
        agent: Value,
        session_id: String,
        release_id: Option<String>,
        /// The user message of the turn; `null` when callbackd has none recorded (a run
        /// started by another client than the run API).
        input: Option<RunInput>,
    },
    Step {
        index: u32,
        kind: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
    MessageSnapshot {
        message_id: String,
        text: String,
        delta: u32,
        attempt: u32,
    },
    ToolStarted {
        tool_call_id: String,
        tool: String,
        /// The call's arguments (JSON); over [`FULL_VALUE_BYTES`] of JSON text, a string of
        /// its first bytes and `truncated: true`.
        arguments: Value,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        truncated: bool,
    },
    /// The agent's plan (the built-in `update_plan` tool's call): every item, replacing the
    /// previous plan. It stands for that call's `tool_started`.
    Plan {
        tool_call_id: String,
        #[schemars(with = "Vec<super::schema::PlanItem>")]
        items: Vec<Value>,
    },
    /// How a tool call ended, as every view tells it (see [`ToolCall`]). A call still open
    /// when its run ended gets one (`cancelled`) just before the run's terminal event, with
    /// that event's seq.
    ToolCompleted {
        tool_call_id: String,
        tool: String,
        outcome: &'static str,
        duration_ms: Option<i64>,
        /// A call held for approval: the wait for the person (not in `duration_ms`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        waited_ms: Option<i64>,
        /// What the tool ran with (the approved arguments, edited or not); over
        /// [`FULL_VALUE_BYTES`] of JSON text, a string of its first bytes and
        /// `truncated: true`, like `result`.
        #[schemars(with = "Option<super::schema::Object>")]
        arguments: Value,
        /// What the model asked, present only when a person changed it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(with = "Option<super::schema::Object>")]
        requested_arguments: Option<Value>,
        /// What the tool returned, its own JSON (a custom tool's as callbackd recorded it,
        /// a built-in's as the bridge stored it); over [`FULL_VALUE_BYTES`] of JSON text, a
        /// string of its first bytes and `truncated: true`
        /// (`GET /v1/runs/{run_id}/tool_calls/{tool_call_id}` has it whole).
        result: Value,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        truncated: bool,
        /// A held call: the decision on it (who, when, how, why).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        decision: Option<Box<Decision>>,
        /// An `ask_user` call: the question and the answer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        question: Option<Box<QuestionRecord>>,
    },
    ToolOutcomeUnknown {
        tool_call_id: String,
        tool: String,
        reason: String,
    },
    Task {
        #[schemars(with = "Option<super::schema::Scalar>")]
        task_id: Value,
        #[schemars(with = "Option<String>")]
        title: Value,
        #[schemars(with = "Option<super::schema::Scalar>")]
        status: Value,
        #[schemars(with = "Option<super::schema::Scalar>")]
        progress: Value,
    },
    Usage {
        #[schemars(with = "Option<super::schema::Usage>")]
        usage: Value,
    },
    Completed {
        #[schemars(with = "Option<super::schema::Usage>")]
        usage: Value,
        status: String,
        output: Option<String>,
    },
    Error {
        status: &'static str,
        problem: Problem,
        #[schemars(with = "Option<super::schema::Usage>")]
        usage: Value,
    },
    SdkMessage {
        #[schemars(with = "super::schema::Object")]
        message: Value,
    },
}

impl Durable {
    /// `completed` and `error` end a run's stream.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Durable::Completed { .. } | Durable::Error { .. })
    }
}

/// What a run was asked: the user message that started it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct RunInput {
    pub text: String,
    /// Present (and `true`) when `text` was cut short: runs lists show the first
    /// [`RunInput::LISTED_CHARS`] characters; `GET /v1/runs/{run_id}` has it whole.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

impl RunInput {
    /// Characters of the input a runs list shows.
    pub const LISTED_CHARS: usize = 200;

    pub fn whole(text: String) -> RunInput {
        RunInput {
            text,
            truncated: false,
        }
    }

    /// The input as a list shows it: its first [`Self::LISTED_CHARS`] characters.
    pub fn listed(text: &str) -> RunInput {
        match text.char_indices().nth(Self::LISTED_CHARS) {
            None => RunInput::whole(text.to_string()),
            Some((end, _)) => RunInput {
                text: text[..end].to_string(),
                truncated: true,
            },
        }
    }
}

/// The `data:` JSON of a stream event: `type`, `seq`, `run_id`, `at`, then its fields.
pub fn event_json(event: &impl Serialize, seq: u64, run_id: &str, at_ms: i64) -> String {
    let Ok(Value::Object(mut fields)) = serde_json::to_value(event) else {
        return "{}".into();
    };
    let kind = fields.remove("type").unwrap_or(Value::Null);
    let mut out = format!(
        "{{\"type\":{kind},\"seq\":{seq},\"run_id\":{},\"at\":\"{}\"",
        Value::from(run_id),
        rfc3339_ms(at_ms)
    );
    // The rest in key order (serde_json's map is sorted): the same bytes every time.
    for (k, v) in fields {
        out.push(',');
        out.push_str(&Value::from(k).to_string());
        out.push(':');
        out.push_str(&v.to_string());
    }
    out.push('}');
    out
}
