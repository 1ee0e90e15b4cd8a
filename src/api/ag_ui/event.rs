//! The AG-UI 1.0 events `POST /v1/ag-ui` sends, as `@ag-ui/core`'s `EventSchema` defines
//! them (closed objects: only the fields named there), and their SSE encoding
//! (`data: <json>\n\n`, the encoding `@ag-ui/encoder` writes and `HttpAgent` parses).

use serde::Serialize;
use serde_json::Value;

/// The protocol version this producer speaks (`RUN_STARTED.protocolVersion`).
pub const PROTOCOL_VERSION: &str = "1.0";

/// One AG-UI event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(
    tag = "type",
    rename_all = "SCREAMING_SNAKE_CASE",
    rename_all_fields = "camelCase"
)]
pub enum AgUiEvent {
    RunStarted {
        thread_id: String,
        run_id: String,
        protocol_version: &'static str,
    },
    RunFinished {
        thread_id: String,
        run_id: String,
        outcome: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        usage: Option<Vec<Value>>,
    },
    RunError {
        message: String,
        code: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        usage: Option<Vec<Value>>,
    },
    TextMessageStart {
        message_id: String,
        role: &'static str,
    },
    TextMessageContent {
        message_id: String,
        delta: String,
    },
    TextMessageEnd {
        message_id: String,
    },
    ReasoningStart {
        message_id: String,
    },
    ReasoningMessageStart {
        message_id: String,
        role: &'static str,
    },
    ReasoningMessageContent {
        message_id: String,
        delta: String,
    },
    ReasoningMessageEnd {
        message_id: String,
    },
    ReasoningEnd {
        message_id: String,
    },
    ToolCallStart {
        tool_call_id: String,
        tool_call_name: String,
    },
    ToolCallArgs {
        tool_call_id: String,
        delta: String,
    },
    ToolCallEnd {
        tool_call_id: String,
    },
    ToolCallResult {
        message_id: String,
        tool_call_id: String,
        content: String,
        role: &'static str,
    },
    ActivitySnapshot {
        message_id: String,
        activity_type: &'static str,
        content: Value,
        replace: bool,
    },
}

impl AgUiEvent {
    /// The event's SSE block.
    pub fn frame(&self) -> String {
        format!(
            "data: {}\n\n",
            serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
        )
    }

    /// The three events of a whole text message (none for an empty one: AG-UI's content
    /// deltas are never empty).
    pub fn text_message(message_id: String, text: &str) -> Vec<AgUiEvent> {
        if text.is_empty() {
            return Vec::new();
        }
        vec![
            AgUiEvent::TextMessageStart {
                message_id: message_id.clone(),
                role: "assistant",
            },
            AgUiEvent::TextMessageContent {
                message_id: message_id.clone(),
                delta: text.to_string(),
            },
            AgUiEvent::TextMessageEnd { message_id },
        ]
    }

    /// The five events of a whole reasoning message.
    pub fn reasoning(message_id: String, text: &str) -> Vec<AgUiEvent> {
        if text.is_empty() {
            return Vec::new();
        }
        vec![
            AgUiEvent::ReasoningStart {
                message_id: message_id.clone(),
            },
            AgUiEvent::ReasoningMessageStart {
                message_id: message_id.clone(),
                role: "reasoning",
            },
            AgUiEvent::ReasoningMessageContent {
                message_id: message_id.clone(),
                delta: text.to_string(),
            },
            AgUiEvent::ReasoningMessageEnd {
                message_id: message_id.clone(),
            },
            AgUiEvent::ReasoningEnd { message_id },
        ]
    }

    /// The three events of a tool call the model made: its name, its arguments' JSON, end.
    pub fn tool_call(tool_call_id: &str, name: &str, arguments: &Value) -> Vec<AgUiEvent> {
        let args = match arguments {
            // A truncated value is already the start of the JSON text.
            Value::String(s) => s.clone(),
            Value::Null => "{}".to_string(),
            other => other.to_string(),
        };
        vec![
            AgUiEvent::ToolCallStart {
                tool_call_id: tool_call_id.to_string(),
                tool_call_name: name.to_string(),
            },
            AgUiEvent::ToolCallArgs {
                tool_call_id: tool_call_id.to_string(),
                delta: args,
            },
            AgUiEvent::ToolCallEnd {
                tool_call_id: tool_call_id.to_string(),
            },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_serialise_with_agui_type_names_and_camel_case_fields() {
        let e = AgUiEvent::ToolCallStart {
            tool_call_id: "c".into(),
            tool_call_name: "deploy".into(),
        };
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "deploy"})
        );
        let f = AgUiEvent::RunFinished {
            thread_id: "t".into(),
            run_id: "r".into(),
            outcome: json!({"type": "success"}),
            result: None,
            usage: None,
        }
        .frame();
        assert_eq!(
            f,
            "data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\",\"outcome\":{\"type\":\"success\"}}\n\n"
        );
    }
}
