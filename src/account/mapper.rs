//! [`RunMapper`]: how each durable stream event is built from a stored `sdk_message` event.
//! A pure function of the run's stored events (fed from seq 1, in order), its run document
//! and callbackd's own records beside them ([`Beside`]), so a replay gives exactly what the
//! live stream gave.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::durable::{Durable, FULL_VALUE_BYTES};
use super::problem::run_problem;
use super::stored::StoredEvent;
use super::tool_call::{self, Beside, ToolCall};
use crate::clock::rfc3339_ms;
use crate::run::RunStatus;

/// Builds a run's durable stream events from its stored events, in seq order.
pub struct RunMapper {
    session_id: String,
    model: Value,
    step_index: u32,
    usage: Value,
    last_text: Option<String>,
    /// Every tool call so far, in the order they started.
    calls: Vec<ToolCall>,
    /// tool_call_id -> (index in `calls`, createdAt of its `running` event) of the calls
    /// that have not ended.
    open: HashMap<String, (usize, i64)>,
    beside: Beside,
    /// The `tool_completed` of the calls the last mapped event (a terminal one) closed.
    closed: Vec<Durable>,
    /// The run's terminal event was mapped: its end closed every open call.
    ended: bool,
}

impl RunMapper {
    /// `run_doc` is the run document (for the model and the session id); `beside`,
    /// callbackd's records of the run.
    pub fn new(run_doc: &Value, beside: Beside) -> Self {
        RunMapper {
            session_id: run_doc
                .get("agentId")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            model: run_doc
                .get("model")
                .and_then(|m| m.get("id"))
                .cloned()
                .unwrap_or(Value::Null),
            step_index: 0,
            usage: Value::Null,
            last_text: None,
            calls: Vec::new(),
            open: HashMap::new(),
            beside,
            closed: Vec::new(),
            ended: false,
        }
    }

    pub fn set_beside(&mut self, beside: Beside) {
        self.beside = beside;
    }

    /// The run's tool calls so far, in the order they started.
    pub fn calls(&self) -> &[ToolCall] {
        &self.calls
    }

    /// The `tool_completed` events of the calls still open when the run ended, which the
    /// last mapped (terminal) event closed: each is sent just before it.
    pub fn take_closed(&mut self) -> Vec<Durable> {
        std::mem::take(&mut self.closed)
    }

    /// The stream event of stored event `ev` (which must be the run's next one). Snapshot
    /// deltas are 0 here; the stream sets the recorded value.
    pub fn map(&mut self, ev: &StoredEvent) -> Durable {
        self.closed.clear();
        let event = self.map_one(ev);
        if event.is_terminal() {
            self.close_open(ev.created_at_ms);
            self.ended = true;
        }
        event
    }

    /// Every call still open ends with the run: cancelled (the bridge will not store its
    /// completion). Made from the stored events alone, so a replay makes the same.
    fn close_open(&mut self, at_ms: i64) {
        let mut open: Vec<(String, (usize, i64))> = self.open.drain().collect();
        open.sort_by_key(|(_, (i, _))| *i);
        for (_, (i, _)) in open {
            let call = &mut self.calls[i];
            if let Some(reason) = tool_call::close_cut_off(call, &self.beside, at_ms) {
                self.closed.push(Durable::ToolOutcomeUnknown {
                    tool_call_id: call.tool_call_id.clone(),
                    tool: call.tool.clone(),
                    reason,
                });
                continue;
            }
            call.outcome = "cancelled";
            call.ended_at = Some(rfc3339_ms(at_ms));
            // A decision recorded before the run's end (`POST .../cancel` cancels the held
            // calls before it tells the bridge) is told; one recorded after it (the end
            // detected when the bridge stored it) is the same for every reader: left out.
            let approval = self
                .beside
                .approval(&call.tool_call_id)
                .filter(|a| a.state != "pending" && a.decided_at_ms.is_some_and(|d| d <= at_ms));
            let (decision, question) = tool_call::decision_and_question(approval, &call.tool);
            call.decision = decision.clone();
            call.question = question.clone();
            let (arguments, truncated) = capped(call.arguments.clone());
            self.closed.push(Durable::ToolCompleted {
                tool_call_id: call.tool_call_id.clone(),
                tool: call.tool.clone(),
                outcome: "cancelled",
                duration_ms: None,
                waited_ms: None,
                arguments,
                requested_arguments: None,
                result: Value::Null,
                truncated,
                decision: decision.map(Box::new),
                question: question.map(Box::new),
            });
        }
    }

    /// Whether a call is open (started, not ended): the run's end would close it.
    pub fn has_open(&self) -> bool {
        !self.open.is_empty()
    }

    /// Whether mapping stored event `ev` (the run's next) tells how a call ended, which
    /// callbackd's records say (final before the bridge stores it): a tool call's
    /// completion, or the run's end while a call is open (it closes them with what their
    /// approvals say by then). Then [`Beside`] must be read again before
    /// [`map`](Self::map) (`RunSources::map` does).
    pub fn needs_records(&self, ev: &StoredEvent) -> bool {
        let message = ev.payload.get("message");
        let kind = message.and_then(|m| m.get("type")).and_then(Value::as_str);
        let status = message
            .and_then(|m| m.get("status"))
            .and_then(Value::as_str);
        let closes = kind == Some("status")
            && status
                .and_then(RunStatus::parse_event)
                .is_some_and(RunStatus::is_terminal)
            && self.has_open();
        (kind == Some("tool_call") && status != Some("running")) || closes
    }

    fn map_one(&mut self, ev: &StoredEvent) -> Durable {
        let message = ev.payload.get("message");
        let sdk = ev.payload.get("type").and_then(Value::as_str) == Some("sdk_message");
        let (Some(message), true) = (message, sdk) else {
            return Durable::SdkMessage {
                message: ev.payload.clone(),
            };
        };
        let kind = message.get("type").and_then(Value::as_str).unwrap_or("");
        let str_of = |k: &str| message.get(k).and_then(Value::as_str).map(str::to_string);
        match kind {
            "request" => Durable::RunStarted {
                agent: json!({"id": self.session_id, "model": self.model}),
                session_id: self.session_id.clone(),
                release_id: None,
                input: None,
            },
            "status" => {
                let status = str_of("status").unwrap_or_default();
                match RunStatus::parse_event(&status) {
                    Some(RunStatus::Error) => Durable::Error {
                        status: RunStatus::Error.as_str(),
                        problem: run_problem(message.get("message").and_then(Value::as_str)),
                        usage: self.usage.clone(),
                    },
                    Some(end) if end.is_terminal() => Durable::Completed {
                        usage: self.usage.clone(),
                        status: end.as_str().to_string(),
                        output: self.last_text.clone(),
                    },
                    _ => {
                        self.step_index += 1;
                        Durable::Step {
                            index: self.step_index,
                            kind: "status",
                            status: Some(status),
                            text: None,
                        }
                    }
                }
            }
            "thinking" => {
                self.step_index += 1;
                Durable::Step {
                    index: self.step_index,
                    kind: "thinking",
                    status: None,
                    text: str_of("text").filter(|t| !t.is_empty()),
                }
            }
            "assistant" => {
                let text = assistant_text(message.get("message"));
                self.last_text = Some(text.clone());
                Durable::MessageSnapshot {
                    message_id: format!("msg_{}", ev.seq),
                    text,
                    delta: 0,
                    // Nothing the bridge sends or stores marks where a retried attempt
                    // starts, and guessing would mislabel a model's repeated tool call:
                    // run-api.md, "Attempts".
                    attempt: 1,
                }
            }
            "tool_call" => self.tool_call(message, ev.created_at_ms),
            "task" => Durable::Task {
                task_id: message
                    .get("task_id")
                    .or_else(|| message.get("id"))
                    .cloned()
                    .unwrap_or(Value::Null),
                title: message.get("title").cloned().unwrap_or(Value::Null),
                status: message.get("status").cloned().unwrap_or(Value::Null),
                progress: message.get("progress").cloned().unwrap_or(Value::Null),
            },
            "usage" => {
                self.usage = message.get("usage").cloned().unwrap_or(Value::Null);
                Durable::Usage {
                    usage: self.usage.clone(),
                }
            }
            _ => Durable::SdkMessage {
                message: message.clone(),
            },
        }
    }

    fn tool_call(&mut self, message: &Value, at_ms: i64) -> Durable {
        let call_id = message
            .get("call_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let name = message.get("name").and_then(Value::as_str).unwrap_or("");
        // `get` rather than `pointer`, here and below: a pointer is split and unescaped at
        // every call (a fifth of a traced tool call's mapping, issue 39).
        let tool = match (
            name,
            message
                .get("args")
                .and_then(|a| a.get("toolName"))
                .and_then(Value::as_str),
        ) {
            ("mcp", Some(t)) => t.to_string(),
            (n, _) => n.to_string(),
        };
        let status = message.get("status").and_then(Value::as_str).unwrap_or("");
        let requested = tool_arguments(message);
        if status == "running" {
            // A repeated `running` event of an open call replaces its entry.
            let index = match self.open.get(&call_id) {
                Some(&(i, _)) => i,
                None => {
                    self.calls.push(ToolCall::default());
                    self.calls.len() - 1
                }
            };
            self.open.insert(call_id.clone(), (index, at_ms));
            self.calls[index] = ToolCall {
                tool_call_id: call_id.clone(),
                tool: tool.clone(),
                outcome: "running",
                started_at: rfc3339_ms(at_ms),
                ended_at: None,
                duration_ms: None,
                waited_ms: None,
                arguments: requested.clone(),
                requested_arguments: None,
                result: Value::Null,
                cut_off: false,
                decision: None,
                question: None,
            };
            if tool == crate::tools::builtin::update_plan::NAME {
                if let Ok(items) = crate::tools::builtin::update_plan::items(&requested) {
                    return Durable::Plan {
                        tool_call_id: call_id,
                        items: items.clone(),
                    };
                }
            }
            let (arguments, truncated) = capped(requested);
            return Durable::ToolStarted {
                tool_call_id: call_id,
                tool,
                arguments,
                truncated,
            };
        }
        let (index, started) = match self.open.remove(&call_id) {
            Some((i, t)) => (Some(i), Some(t)),
            None => (None, None),
        };
        let record = self.beside.record(&call_id);
        let approval = self.beside.approval(&call_id);
        // The execution time: callbackd's record of a custom tool's call (final before the
        // bridge stores the completion; a call held for approval starts when approved), else
        // the time between the stored `running` and completion events.
        let waited_ms = record.and_then(|r| r.waited_ms);
        let duration_ms = match record.and_then(tool_call::executed_ms) {
            Some(executed) => executed,
            None => started.map(|s| (at_ms - s).max(0)),
        };
        // A failed host tool: `result.status: "error"`, or (cursor-sdk 1.1.0, observed) a
        // "success" whose value is an MCP error result (`isError: true`).
        let result_of = |key: &str| message.get("result").and_then(|r| r.get(key));
        let failed = status == "error"
            || result_of("status").and_then(Value::as_str) == Some("error")
            || result_of("value")
                .and_then(|v| v.get("isError"))
                .and_then(Value::as_bool)
                == Some(true);
        // How it ended: callbackd's record of a custom tool's call, else the bridge's word.
        let outcome = match record {
            Some(r) if r.ended_at_ms.is_some() => tool_call::outcome_of(r, approval),
            _ if failed => "error",
            _ => "ok",
        };
        let (arguments, requested_arguments) =
            tool_call::arguments_of(requested, record, approval, &tool);
        let result = record
            .and_then(|r| r.result.clone())
            .unwrap_or_else(|| message.get("result").cloned().unwrap_or(Value::Null));
        let (decision, question) = tool_call::decision_and_question(approval, &tool);
        let call = ToolCall {
            tool_call_id: call_id.clone(),
            tool: tool.clone(),
            outcome,
            started_at: rfc3339_ms(started.unwrap_or(at_ms)),
            ended_at: Some(rfc3339_ms(at_ms)),
            duration_ms,
            waited_ms,
            arguments: arguments.clone(),
            requested_arguments: requested_arguments.clone(),
            result: result.clone(),
            cut_off: record.is_some_and(|r| r.cut_off),
            decision: decision.clone(),
            question: question.clone(),
        };
        match index {
            Some(i) => self.calls[i] = call,
            // The bridge stored a completion after the run's end (a held call the cancel
            // answered): the end closed that call already, and the stream, which ends with
            // the run, never tells this one; neither does the run state, as a second call.
            None if self.ended => {}
            None => self.calls.push(call),
        }
        if let Some(r) = record.filter(|r| r.cut_off && failed) {
            return Durable::ToolOutcomeUnknown {
                tool_call_id: call_id,
                tool,
                reason: tool_call::cut_off_reason(r),
            };
        }
        let (arguments, args_cut) = capped(arguments);
        let requested_arguments = requested_arguments.map(|r| capped(r).0);
        let (result, result_cut) = capped(result);
        Durable::ToolCompleted {
            tool_call_id: call_id,
            tool,
            outcome,
            duration_ms,
            waited_ms,
            arguments,
            requested_arguments,
            result,
            truncated: args_cut || result_cut,
            decision: decision.map(Box::new),
            question: question.map(Box::new),
        }
    }
}

/// A tool call's arguments in its stored `tool_call` message: a custom tool's (`mcp`) are
/// `args.args`, a built-in's are `args`.
pub fn tool_arguments(message: &Value) -> Value {
    match message.get("name").and_then(Value::as_str) {
        Some("mcp") => message.get("args").and_then(|a| a.get("args")),
        _ => message.get("args"),
    }
    .cloned()
    .unwrap_or(Value::Null)
}

/// `value` if its JSON text fits [`FULL_VALUE_BYTES`]; else a string of the text's first
/// bytes (whole characters), and `true`.
fn capped(value: Value) -> (Value, bool) {
    // Most values are far below the cap: a bound on their text's length, found without
    // writing it, answers for them (writing every call's arguments and result only to
    // measure them was a seventh of a traced call's mapping, issue 39).
    if text_bound(&value, FULL_VALUE_BYTES).is_some() {
        return (value, false);
    }
    let text = value.to_string();
    if text.len() <= FULL_VALUE_BYTES {
        return (value, false);
    }
    let mut end = FULL_VALUE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (Value::String(text[..end].to_string()), true)
}

/// At least the length of `value`'s JSON text (a string's characters each escaped at worst
/// as `\uXXXX`), if that is at most `budget`; `None` past it (the walk stops there).
fn text_bound(value: &Value, budget: usize) -> Option<usize> {
    let string = |s: &str| 2 + 6 * s.len();
    let len = match value {
        Value::Null | Value::Bool(_) => 5,
        // An f64's shortest text, sign and exponent included, is at most 24 bytes.
        Value::Number(_) => 24,
        Value::String(s) => string(s),
        Value::Array(items) => {
            let mut len = 2 + items.len();
            for item in items {
                len += text_bound(item, budget.checked_sub(len)?)?;
            }
            len
        }
        Value::Object(members) => {
            let mut len = 2 + 2 * members.len();
            for (key, item) in members {
                len += string(key);
                len += text_bound(item, budget.checked_sub(len)?)?;
            }
            len
        }
    };
    (len <= budget).then_some(len)
}

/// The whole text of an assistant message: its text parts, joined.
fn assistant_text(message: Option<&Value>) -> String {
    let Some(content) = message.and_then(|m| m.get("content")) else {
        return String::new();
    };
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

#[cfg(test)]
#[path = "mapper_tests.rs"]
mod tests;
