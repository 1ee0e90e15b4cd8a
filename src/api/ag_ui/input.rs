//! The AG-UI `RunAgentInput` as `POST /v1/ag-ui` takes it, checked field by field so a body
//! that is not one is refused naming the field (`400`), and what the input asks for: a new
//! turn (the last message is the user's), the answers to interrupts (`resume`), or the
//! results of frontend tool calls (`tool` messages after the last assistant message).

use serde_json::{Map, Value};

use super::super::problem::Problem;

/// A checked `RunAgentInput`.
#[derive(Debug, Clone)]
pub struct RunAgentInput {
    pub thread_id: String,
    pub run_id: String,
    pub messages: Vec<Value>,
    /// Frontend tools: `{name, description, parameters}`.
    pub tools: Vec<FrontendTool>,
    pub forwarded_props: Value,
    pub resume: Vec<ResumeEntry>,
}

/// A tool the client declares and runs itself.
#[derive(Debug, Clone, PartialEq)]
pub struct FrontendTool {
    pub name: String,
    pub description: String,
    /// Its JSON Schema (`{"type": "object"}` when the input gave none).
    pub parameters: Value,
}

/// One answer to an interrupt.
#[derive(Debug, Clone, PartialEq)]
pub struct ResumeEntry {
    pub interrupt_id: String,
    /// `resolved` (answered) or not (`cancelled`: abandoned).
    pub resolved: bool,
    pub payload: Value,
}

/// What an input asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Ask {
    /// A new turn with the last user message's text.
    Turn(String),
    /// Answers to the interrupts of the thread's held run.
    Resume,
    /// Results of frontend tool calls: `(toolCallId, content)`, in message order.
    ToolResults(Vec<(String, String)>),
}

fn field<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    obj.get(name).filter(|v| !v.is_null())
}

fn required_string(obj: &Map<String, Value>, name: &str, at: &str) -> Result<String, Problem> {
    match field(obj, name) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err(Problem::invalid(format!("{at}{name} is empty"))),
        Some(other) => Err(Problem::invalid(format!(
            "{at}{name} must be a string, not {}",
            kind(other)
        ))),
        None => Err(Problem::invalid(format!(
            "{at}{name} is required (a RunAgentInput has threadId, runId and messages)"
        ))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn list<'a>(obj: &'a Map<String, Value>, name: &str) -> Result<&'a [Value], Problem> {
    match field(obj, name) {
        None => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(other) => Err(Problem::invalid(format!(
            "{name} must be a list, not {}",
            kind(other)
        ))),
    }
}

/// The roles AG-UI 1.0 messages have.
const ROLES: [&str; 7] = [
    "user",
    "assistant",
    "system",
    "developer",
    "tool",
    "activity",
    "reasoning",
];

impl RunAgentInput {
    /// Checks `body` as a `RunAgentInput`; a problem naming the first field that is wrong.
    pub fn parse(body: &Value) -> Result<RunAgentInput, Problem> {
        let Value::Object(obj) = body else {
            return Err(Problem::invalid(format!(
                "the body must be a RunAgentInput object, not {}",
                kind(body)
            )));
        };
        let thread_id = required_string(obj, "threadId", "")?;
        let run_id = required_string(obj, "runId", "")?;
        let messages = match field(obj, "messages") {
            Some(Value::Array(items)) => items.clone(),
            Some(other) => {
                return Err(Problem::invalid(format!(
                    "messages must be a list of messages, not {}",
                    kind(other)
                )))
            }
            None => {
                return Err(Problem::invalid(
                    "messages is required (a list; [] when there are none)",
                ))
            }
        };
        for (i, m) in messages.iter().enumerate() {
            let Value::Object(m) = m else {
                return Err(Problem::invalid(format!(
                    "messages[{i}] must be a message object, not {}",
                    kind(m)
                )));
            };
            let at = format!("messages[{i}].");
            required_string(m, "id", &at)?;
            let role = required_string(m, "role", &at)?;
            if !ROLES.contains(&role.as_str()) {
                return Err(Problem::invalid(format!(
                    "messages[{i}].role must be one of {}, not {role:?}",
                    ROLES.join(", ")
                )));
            }
            if role == "tool" {
                required_string(m, "toolCallId", &at)?;
            }
        }
        let mut tools = Vec::new();
        for (i, t) in list(obj, "tools")?.iter().enumerate() {
            let Value::Object(t) = t else {
                return Err(Problem::invalid(format!(
                    "tools[{i}] must be a tool object, not {}",
                    kind(t)
                )));
            };
            let at = format!("tools[{i}].");
            let name = required_string(t, "name", &at)?;
            let description = match field(t, "description") {
                None => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => {
                    return Err(Problem::invalid(format!(
                        "tools[{i}].description must be a string, not {}",
                        kind(other)
                    )))
                }
            };
            let parameters = match field(t, "parameters") {
                None => serde_json::json!({"type": "object"}),
                Some(p @ Value::Object(_)) => p.clone(),
                Some(other) => {
                    return Err(Problem::invalid(format!(
                        "tools[{i}].parameters must be a JSON Schema object, not {}",
                        kind(other)
                    )))
                }
            };
            tools.push(FrontendTool {
                name,
                description,
                parameters,
            });
        }
        list(obj, "context")?;
        let mut resume = Vec::new();
        for (i, r) in list(obj, "resume")?.iter().enumerate() {
            let Value::Object(r) = r else {
                return Err(Problem::invalid(format!(
                    "resume[{i}] must be a resume entry object, not {}",
                    kind(r)
                )));
            };
            let at = format!("resume[{i}].");
            let interrupt_id = required_string(r, "interruptId", &at)?;
            let resolved = match required_string(r, "status", &at)?.as_str() {
                "resolved" => true,
                "cancelled" => false,
                other => {
                    return Err(Problem::invalid(format!(
                        "resume[{i}].status must be \"resolved\" or \"cancelled\", not {other:?}"
                    )))
                }
            };
            resume.push(ResumeEntry {
                interrupt_id,
                resolved,
                payload: r.get("payload").cloned().unwrap_or(Value::Null),
            });
        }
        Ok(RunAgentInput {
            thread_id,
            run_id,
            messages,
            tools,
            forwarded_props: obj.get("forwardedProps").cloned().unwrap_or(Value::Null),
            resume,
        })
    }

    /// The model `forwardedProps.model` names, if any.
    pub fn model(&self) -> Result<Option<String>, Problem> {
        match self.forwarded_props.get("model") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(m)) if !m.trim().is_empty() => Ok(Some(m.clone())),
            Some(other) => Err(Problem::invalid(format!(
                "forwardedProps.model must be a model id (a non-empty string), not {other}"
            ))),
        }
    }

    /// What the input asks for: answers when it has `resume` entries; else the results of
    /// frontend tool calls when the messages end with `tool` messages; else a new turn when
    /// the last message is the user's; else `400`.
    pub fn ask(&self) -> Result<Ask, Problem> {
        if !self.resume.is_empty() {
            return Ok(Ask::Resume);
        }
        let results: Vec<(String, String)> = self
            .messages
            .iter()
            .rev()
            .take_while(|m| role(m) == "tool")
            .map(|m| {
                (
                    m.get("toolCallId")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    content_text(m.get("content")),
                )
            })
            .collect();
        if !results.is_empty() {
            return Ok(Ask::ToolResults(results.into_iter().rev().collect()));
        }
        match self.messages.last() {
            Some(m) if role(m) == "user" => {
                let text = content_text(m.get("content"));
                if text.trim().is_empty() {
                    return Err(Problem::invalid(format!(
                        "messages[{}] (the last user message) has no text",
                        self.messages.len() - 1
                    )));
                }
                Ok(Ask::Turn(text))
            }
            _ => Err(Problem::invalid(
                "the input has neither a new user message (the last message, role \"user\") \
                 nor a resume answering an interrupt nor tool results: nothing to run",
            )),
        }
    }
}

fn role(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("")
}

/// A message's text: a string, or its text parts joined.
pub fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> Value {
        json!({"threadId": "t1", "runId": "r1", "messages": [
            {"id": "m1", "role": "user", "content": "hi"}
        ]})
    }

    #[test]
    fn a_body_that_is_not_a_run_agent_input_is_refused_naming_the_field() {
        for (body, field) in [
            (
                json!({"runId": "r", "messages": []}),
                "threadId is required",
            ),
            (
                json!({"threadId": "t", "messages": []}),
                "runId is required",
            ),
            (
                json!({"threadId": "t", "runId": "r"}),
                "messages is required",
            ),
            (
                json!({"threadId": "t", "runId": "r", "messages": {}}),
                "messages must be a list",
            ),
            (
                json!({"threadId": 3, "runId": "r", "messages": []}),
                "threadId must be a string",
            ),
            (
                json!({"threadId": "t", "runId": "r", "messages": [{"id": "m", "role": "bot"}]}),
                "messages[0].role must be one of",
            ),
            (
                json!({"threadId": "t", "runId": "r", "messages": [], "tools": [{"description": "x"}]}),
                "tools[0].name is required",
            ),
            (
                json!({"threadId": "t", "runId": "r", "messages": [], "resume": [{"interruptId": "i", "status": "ok"}]}),
                "resume[0].status must be",
            ),
            (json!([1]), "must be a RunAgentInput object"),
        ] {
            let p = RunAgentInput::parse(&body).unwrap_err();
            assert_eq!(p.status, 400);
            assert!(p.detail.contains(field), "{body}: {}", p.detail);
        }
    }

    #[test]
    fn the_turn_is_the_last_user_message_and_text_parts_are_joined() {
        let input = RunAgentInput::parse(&base()).unwrap();
        assert_eq!(input.ask().unwrap(), Ask::Turn("hi".into()));
        let mut b = base();
        b["messages"] = json!([
            {"id": "m0", "role": "user", "content": "old"},
            {"id": "a0", "role": "assistant", "content": "answer"},
            {"id": "m1", "role": "user", "content": [{"type": "text", "text": "new"}, {"type": "text", "text": "two"}]}
        ]);
        let input = RunAgentInput::parse(&b).unwrap();
        assert_eq!(input.ask().unwrap(), Ask::Turn("new\ntwo".into()));
    }

    #[test]
    fn neither_a_user_message_nor_a_resume_is_refused() {
        let mut b = base();
        b["messages"] = json!([{"id": "a", "role": "assistant", "content": "x"}]);
        let p = RunAgentInput::parse(&b).unwrap().ask().unwrap_err();
        assert!(
            p.detail.contains("neither a new user message"),
            "{}",
            p.detail
        );
        b["messages"] = json!([]);
        assert!(RunAgentInput::parse(&b).unwrap().ask().is_err());
    }

    #[test]
    fn trailing_tool_messages_are_frontend_tool_results_and_resume_wins() {
        let mut b = base();
        b["messages"] = json!([
            {"id": "m", "role": "user", "content": "go"},
            {"id": "a", "role": "assistant", "toolCalls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"id": "t", "role": "tool", "toolCallId": "c1", "content": "42"}
        ]);
        let input = RunAgentInput::parse(&b).unwrap();
        assert_eq!(
            input.ask().unwrap(),
            Ask::ToolResults(vec![("c1".into(), "42".into())])
        );
        b["resume"] = json!([{"interruptId": "i", "status": "cancelled"}]);
        let input = RunAgentInput::parse(&b).unwrap();
        assert_eq!(input.ask().unwrap(), Ask::Resume);
        assert!(!input.resume[0].resolved);
    }
}

/// The `RunAgentInput` as the OpenAPI document describes it (the AG-UI 1.0 schema's shape;
/// [`RunAgentInput::parse`] is what checks it).
#[derive(schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "AgUiRunAgentInput")]
#[allow(dead_code)]
pub struct InputDoc {
    /// The conversation: a session (an unknown one starts a session).
    pub thread_id: String,
    /// The AG-UI run's id, echoed in RUN_STARTED and RUN_FINISHED.
    pub run_id: String,
    /// The conversation so far; the last `user` message is the turn's text.
    pub messages: Vec<serde_json::Map<String, Value>>,
    /// Frontend tools `{name, description, parameters}`.
    pub tools: Option<Vec<serde_json::Map<String, Value>>>,
    pub context: Option<Vec<serde_json::Map<String, Value>>>,
    /// The client's state (kept by the client; not sent to the agent).
    pub state: Option<serde_json::Map<String, Value>>,
    /// `{model}`: the model of a new thread's session.
    pub forwarded_props: Option<Value>,
    /// Answers to the interrupts of the previous AG-UI run of the thread.
    pub resume: Option<Vec<serde_json::Map<String, Value>>>,
    pub protocol_version: Option<String>,
    pub parent_run_id: Option<String>,
}
