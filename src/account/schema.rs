//! The OpenAPI shapes of the run account's fields held as free JSON (`serde_json::Value`,
//! passed through from what the bridge stored): `#[schemars(with = ...)]` on those fields
//! points here, so the document has a schema for every field while the bytes stay exactly
//! what was stored. The API's own such shapes are in `api::schema`.

use schemars::JsonSchema;

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
