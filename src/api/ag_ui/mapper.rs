//! How a Cursor run's stream events ([`Durable`], the run API's typed events) become AG-UI
//! events. One [`AgUiMapper`] per AG-UI run: it knows which tool calls it has opened (a
//! held call's `TOOL_CALL_*` may come from its approval before the bridge stores the call)
//! and the run's last usage, which `RUN_FINISHED` carries.
//!
//! | run event | AG-UI |
//! |---|---|
//! | `message_snapshot` | `TEXT_MESSAGE_START`/`CONTENT` (the whole text)/`END` |
//! | `step` of kind `thinking` with text | `REASONING_START`, `REASONING_MESSAGE_*`, `REASONING_END` |
//! | `tool_started` | `TOOL_CALL_START`/`ARGS` (the arguments' JSON)/`END` |
//! | `plan` | the call's `TOOL_CALL_*` and `ACTIVITY_SNAPSHOT` `activityType: "plan"` |
//! | `tool_completed`, `tool_outcome_unknown` | `TOOL_CALL_RESULT` (the tool's own output) |
//! | `task` | `ACTIVITY_SNAPSHOT` `activityType: "task"` |
//! | `usage` | kept; `RUN_FINISHED.usage` / `RUN_ERROR.usage` |
//! | `completed` finished | `RUN_FINISHED` `{type: "success"}`, `result: {output}` |
//! | `completed` cancelled | `RUN_FINISHED` `{type: "cancelled"}` |
//! | `completed` expired, `error` | `RUN_ERROR` |

use std::collections::HashSet;

use serde_json::{json, Value};

use super::event::AgUiEvent;
use crate::account::Durable;
use crate::run::RunStatus;

/// The AG-UI side of one AG-UI run over a Cursor run.
#[derive(Debug, Clone, Default)]
pub struct AgUiMapper {
    pub thread_id: String,
    /// The AG-UI run id (the input's `runId`).
    pub run_id: String,
    /// The Cursor run's id: message ids are made from it, unique within the thread.
    pub cursor_run: String,
    /// Tool calls whose `TOOL_CALL_START`…`END` went out (in this AG-UI run or, for a
    /// continuation, in the one it continues).
    pub opened: HashSet<String>,
    /// Frontend tool calls whose result the app sent itself (its `tool` message): their
    /// `TOOL_CALL_RESULT` would be a second copy of that message in the app.
    pub answered: HashSet<String>,
    usage: Option<Value>,
}

/// What a mapped event means for the AG-UI run.
pub enum Mapped {
    /// Send these and go on.
    Go(Vec<AgUiEvent>),
    /// Send these: the last one ends the AG-UI run.
    End(Vec<AgUiEvent>),
}

impl AgUiMapper {
    pub fn new(thread_id: &str, run_id: &str, cursor_run: &str) -> Self {
        AgUiMapper {
            thread_id: thread_id.to_string(),
            run_id: run_id.to_string(),
            cursor_run: cursor_run.to_string(),
            ..Default::default()
        }
    }

    fn id(&self, what: &str, seq: u64) -> String {
        format!("{}-{what}{seq}", self.cursor_run)
    }

    /// The events of run event `ev` (stored at `seq`).
    pub fn map(&mut self, ev: Durable, seq: u64) -> Mapped {
        let events = match ev {
            Durable::MessageSnapshot { text, .. } => {
                AgUiEvent::text_message(self.id("msg", seq), &text)
            }
            Durable::Step {
                kind: "thinking",
                text: Some(text),
                ..
            } => AgUiEvent::reasoning(self.id("think", seq), &text),
            Durable::ToolStarted {
                tool_call_id,
                tool,
                arguments,
                ..
            } => self.open(&tool_call_id, &tool, &arguments),
            Durable::Plan {
                tool_call_id,
                items,
            } => {
                let mut out = self.open(
                    &tool_call_id,
                    crate::tools::builtin::update_plan::NAME,
                    &json!({ "items": items }),
                );
                out.push(AgUiEvent::ActivitySnapshot {
                    message_id: format!("{}-plan", self.cursor_run),
                    activity_type: "plan",
                    content: json!({ "items": items }),
                    replace: true,
                });
                out
            }
            Durable::ToolCompleted { tool_call_id, .. }
                if self.answered.contains(&tool_call_id) =>
            {
                Vec::new()
            }
            Durable::ToolCompleted {
                tool_call_id,
                outcome,
                result,
                ..
            } => vec![AgUiEvent::ToolCallResult {
                message_id: self.id("result", seq),
                tool_call_id,
                content: result_text(outcome, &result),
                role: "tool",
            }],
            Durable::ToolOutcomeUnknown {
                tool_call_id,
                reason,
                ..
            } => vec![AgUiEvent::ToolCallResult {
                message_id: self.id("result", seq),
                tool_call_id,
                content: format!("outcome unknown: {reason}"),
                role: "tool",
            }],
            Durable::Task {
                task_id,
                title,
                status,
                progress,
            } => vec![AgUiEvent::ActivitySnapshot {
                message_id: format!(
                    "{}-task-{}",
                    self.cursor_run,
                    match &task_id {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    }
                ),
                activity_type: "task",
                content: json!({"taskId": task_id, "title": title, "status": status, "progress": progress}),
                replace: true,
            }],
            Durable::Usage { usage } => {
                self.usage = Some(usage);
                Vec::new()
            }
            Durable::Completed {
                usage,
                status,
                output,
            } => {
                if !usage.is_null() {
                    self.usage = Some(usage);
                }
                let last = match RunStatus::parse(&status) {
                    Some(RunStatus::Finished) => self.finished(
                        json!({"type": "success"}),
                        output.map(|o| json!({ "output": o })),
                    ),
                    Some(RunStatus::Cancelled) => self.finished(json!({"type": "cancelled"}), None),
                    _ => self.error(format!("the run ended {status}"), status),
                };
                return Mapped::End(vec![last]);
            }
            Durable::Error { problem, usage, .. } => {
                if !usage.is_null() {
                    self.usage = Some(usage);
                }
                let code = problem.code.as_str().to_string();
                return Mapped::End(vec![self.error(problem.detail, code)]);
            }
            Durable::RunStarted { .. } | Durable::Step { .. } | Durable::SdkMessage { .. } => {
                Vec::new()
            }
        };
        Mapped::Go(events)
    }

    /// `TOOL_CALL_START`/`ARGS`/`END` of a call, once.
    pub fn open(&mut self, tool_call_id: &str, tool: &str, arguments: &Value) -> Vec<AgUiEvent> {
        if !self.opened.insert(tool_call_id.to_string()) {
            return Vec::new();
        }
        AgUiEvent::tool_call(tool_call_id, tool, arguments)
    }

    /// `RUN_FINISHED` with `outcome`.
    pub fn finished(&self, outcome: Value, result: Option<Value>) -> AgUiEvent {
        AgUiEvent::RunFinished {
            thread_id: self.thread_id.clone(),
            run_id: self.run_id.clone(),
            outcome,
            result,
            usage: self.token_usage(),
        }
    }

    /// `RUN_ERROR`.
    pub fn error(&self, message: String, code: String) -> AgUiEvent {
        AgUiEvent::RunError {
            message,
            code,
            usage: self.token_usage(),
        }
    }

    /// The run's usage (the bridge's camelCase counts) as AG-UI `TokenUsage` entries (one: a
    /// Cursor run has one model).
    fn token_usage(&self) -> Option<Vec<Value>> {
        let u = self.usage.as_ref()?.as_object()?;
        let n = |k: &str| u.get(k).and_then(Value::as_u64);
        let (input, output) = (n("inputTokens"), n("outputTokens"));
        let mut entry = serde_json::Map::new();
        for (k, v) in [
            ("inputTokens", input),
            ("outputTokens", output),
            (
                "totalTokens",
                n("totalTokens").or(input.zip(output).map(|(i, o)| i + o)),
            ),
            ("cachedInputTokens", n("cacheReadTokens")),
            ("cacheWriteInputTokens", n("cacheWriteTokens")),
        ] {
            if let Some(v) = v {
                entry.insert(k.into(), v.into());
            }
        }
        (!entry.is_empty()).then(|| vec![Value::Object(entry)])
    }
}

/// A tool's own output as text: the text parts of a custom tool's result (`{content: [{text:
/// {text}}]}` as the bridge stores it, or MCP's `{type: "text", text}`), a string value as it
/// is, else the value's JSON. A call that did not
/// run says so first (`denied: …`).
fn result_text(outcome: &str, result: &Value) -> String {
    let value = result.get("value").unwrap_or(result);
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Object(o) if o.get("content").is_some_and(Value::is_array) => o["content"]
            .as_array()
            .into_iter()
            .flatten()
            // `{text: "…"}`, or the bridge's protobuf form `{text: {text: "…"}}`.
            .filter_map(|p| {
                let t = p.get("text")?;
                t.as_str().or_else(|| t.get("text").and_then(Value::as_str))
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    match outcome {
        "ok" => text,
        other => format!("{other}: {text}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::problem::{Problem, ProblemCode};

    fn events(m: Mapped) -> Vec<Value> {
        let (Mapped::Go(e) | Mapped::End(e)) = m;
        e.iter().map(|e| serde_json::to_value(e).unwrap()).collect()
    }

    #[test]
    fn a_turn_maps_to_text_tool_and_a_finish_with_usage() {
        let mut m = AgUiMapper::new("t", "r", "run1");
        let text = events(m.map(
            Durable::MessageSnapshot {
                message_id: "msg_3".into(),
                text: "hello".into(),
                delta: 0,
                attempt: 1,
            },
            3,
        ));
        let kinds: Vec<&str> = text.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END"
            ]
        );
        assert_eq!(text[1]["delta"], "hello");
        assert_eq!(text[0]["messageId"], "run1-msg3");
        let call = events(m.map(
            Durable::ToolStarted {
                tool_call_id: "c1".into(),
                tool: "deploy".into(),
                arguments: json!({"env": "prod"}),
                truncated: false,
            },
            4,
        ));
        assert_eq!(call[1]["delta"], "{\"env\":\"prod\"}");
        // Opened once: the same call again (its approval, then its stored event) adds nothing.
        assert!(m.open("c1", "deploy", &json!({})).is_empty());
        let result = events(m.map(
            Durable::ToolCompleted {
                tool_call_id: "c1".into(),
                tool: "deploy".into(),
                outcome: "ok",
                duration_ms: None,
                waited_ms: None,
                arguments: json!({"env": "prod"}),
                requested_arguments: None,
                result: json!({"status": "success", "value": {"content": [{"type": "text", "text": "deployed"}]}}),
                truncated: false,
                decision: None,
                question: None,
            },
            5,
        ));
        assert_eq!(result[0]["type"], "TOOL_CALL_RESULT");
        assert_eq!(result[0]["content"], "deployed");
        m.map(
            Durable::Usage {
                usage: json!({"inputTokens": 10, "outputTokens": 5}),
            },
            6,
        );
        let end = m.map(
            Durable::Completed {
                usage: Value::Null,
                status: "finished".into(),
                output: Some("hello".into()),
            },
            7,
        );
        assert!(matches!(end, Mapped::End(_)));
        let end = events(end);
        assert_eq!(end[0]["outcome"], json!({"type": "success"}));
        assert_eq!(
            end[0]["usage"],
            json!([{"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}])
        );
    }

    #[test]
    fn a_cancelled_run_finishes_cancelled_and_a_failed_one_is_a_run_error() {
        let mut m = AgUiMapper::new("t", "r", "run1");
        let end = events(m.map(
            Durable::Completed {
                usage: Value::Null,
                status: "cancelled".into(),
                output: None,
            },
            2,
        ));
        assert_eq!(end[0]["outcome"], json!({"type": "cancelled"}));
        let end = events(m.map(
            Durable::Error {
                status: "error",
                problem: Problem::new(ProblemCode::ResourceExhausted, "[resource_exhausted] quota"),
                usage: Value::Null,
            },
            2,
        ));
        assert_eq!(end[0]["type"], "RUN_ERROR");
        assert_eq!(end[0]["message"], "[resource_exhausted] quota");
    }
}
