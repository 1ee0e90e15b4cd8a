//! The OpenAPI shapes of fields the handlers hold as free JSON (`serde_json::Value`, passed
//! through from what the bridge stored): `#[schemars(with = ...)]` on those fields points
//! here, so the document has a schema for every field (a generated client gets types, not
//! `unknown`), while the bytes served stay exactly what was stored.

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};

pub use crate::account::schema::Usage;

/// A decision on an approval.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
pub enum Verdict {
    Approve,
    Deny,
}

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
