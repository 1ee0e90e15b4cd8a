//! The OpenAPI shapes of fields the handlers hold as free JSON (`serde_json::Value`, passed
//! through from what the bridge stored): `#[schemars(with = ...)]` on those fields points
//! here, so the document has a schema for every field (a generated client gets types, not
//! `unknown`), while the bytes served stay exactly what was stored.

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};

/// Token counts of a run (the bridge's `usage`; more counts may appear).
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct Usage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_read_tokens: Option<u64>,
    pub cache_write_tokens: Option<u64>,
    pub total_tokens: Option<u64>,
}

/// The agent of a `run_started` event.
#[derive(JsonSchema)]
#[allow(dead_code)]
pub struct AgentRef {
    /// The session id (the agent id).
    pub id: String,
    /// The run's model, when the run document names one.
    pub model: Option<String>,
}

/// An item of a `plan` event.
#[derive(JsonSchema)]
#[allow(dead_code)]
pub struct PlanItem {
    pub title: String,
    /// `pending`, `in_progress` or `completed`.
    pub status: String,
}

/// A decision on an approval.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
pub enum Verdict {
    Approve,
    Deny,
}

/// A scalar field of a `task` message, as the bridge sent it.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum Scalar {
    Text(String),
    Number(f64),
    Flag(bool),
}

/// A JSON object, as the bridge stored it (its keys are the bridge's).
pub type Object = serde_json::Map<String, serde_json::Value>;

/// An item of an events page: a `StreamEvent` (the union the stream sends).
pub struct StreamEventRef;

impl JsonSchema for StreamEventRef {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "StreamEventRef".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"$ref": "#/components/schemas/StreamEvent"})
    }
}
