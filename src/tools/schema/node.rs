//! The compiled form of a schema: every subschema a node in one arena, references resolved
//! to node ids, patterns compiled, bounds parsed. Validation reads only this, so a keyword
//! the compiler did not put here cannot be half-enforced: it was either compiled (and so is
//! checked wherever the node is reached, through a `$ref` or not) or refused.

use std::sync::Arc;

use serde_json::Value;

use super::number::{Decimal, Num};
use super::pattern::Pattern;

/// Index of a node in [`Compiled::nodes`].
pub(super) type NodeId = usize;

#[derive(Debug, Clone)]
pub(super) struct Compiled {
    pub nodes: Vec<Node>,
}

#[derive(Debug, Clone)]
pub(super) enum Node {
    /// `true`, `{}` or a schema of annotations only: anything passes.
    Any,
    /// `false`: nothing passes.
    Never,
    Keywords(Box<Keywords>),
}

/// The validation keywords of one schema object. Empty vectors and `None` mean absent.
#[derive(Debug, Clone, Default)]
pub(super) struct Keywords {
    pub reference: Option<NodeId>,
    pub types: Option<Types>,
    pub enumeration: Option<Vec<Value>>,
    pub constant: Option<Value>,
    pub object: Option<Box<ObjectKeywords>>,
    pub array: Option<Box<ArrayKeywords>>,
    pub number: Option<Box<NumberKeywords>>,
    pub string: Option<Box<StringKeywords>>,
    pub all_of: Vec<NodeId>,
    pub any_of: Vec<NodeId>,
    pub one_of: Vec<NodeId>,
    pub not: Option<NodeId>,
    /// `if` with its `then` and `else` (either may be absent). `then`/`else` without `if`
    /// do nothing, as the spec says.
    pub condition: Option<(NodeId, Option<NodeId>, Option<NodeId>)>,
}

/// A set of JSON types, one bit each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Types(pub u8);

impl Types {
    pub const NULL: u8 = 1;
    pub const BOOLEAN: u8 = 2;
    pub const OBJECT: u8 = 4;
    pub const ARRAY: u8 = 8;
    pub const NUMBER: u8 = 16;
    pub const INTEGER: u8 = 32;
    pub const STRING: u8 = 64;

    pub const NAMES: [(&'static str, u8); 7] = [
        ("null", Self::NULL),
        ("boolean", Self::BOOLEAN),
        ("object", Self::OBJECT),
        ("array", Self::ARRAY),
        ("number", Self::NUMBER),
        ("integer", Self::INTEGER),
        ("string", Self::STRING),
    ];

    pub fn matches(self, v: &Value) -> bool {
        let bit = match v {
            Value::Null => Self::NULL,
            Value::Bool(_) => Self::BOOLEAN,
            Value::Object(_) => Self::OBJECT,
            Value::Array(_) => Self::ARRAY,
            Value::String(_) => Self::STRING,
            Value::Number(n) => {
                if self.0 & Self::NUMBER != 0 {
                    return true;
                }
                return self.0 & Self::INTEGER != 0 && Num::of(n).is_integer();
            }
        };
        self.0 & bit != 0
    }

    /// `string`, `integer or null`.
    pub fn describe(self) -> String {
        Self::NAMES
            .iter()
            .filter(|(_, bit)| self.0 & bit != 0)
            .map(|(name, _)| *name)
            .collect::<Vec<_>>()
            .join(" or ")
    }
}

#[derive(Debug, Clone, Default)]
pub(super) struct ObjectKeywords {
    /// Sorted by name (looked up by binary search).
    pub properties: Vec<(String, NodeId)>,
    pub pattern_properties: Vec<(Arc<Pattern>, String, NodeId)>,
    pub additional: Option<NodeId>,
    /// `additionalProperties: false`: named in messages with the allowed names.
    pub additional_false: bool,
    pub property_names: Option<NodeId>,
    pub required: Vec<String>,
    pub dependent_required: Vec<(String, Vec<String>)>,
    pub min_properties: Option<usize>,
    pub max_properties: Option<usize>,
}

#[derive(Debug, Clone, Default)]
pub(super) struct ArrayKeywords {
    /// `prefixItems` (or draft 4-2019 `items` as a list).
    pub prefix: Vec<NodeId>,
    /// `items` after the prefix (or draft 4-2019 `additionalItems`).
    pub rest: Option<NodeId>,
    /// Which keyword `rest` came from, for messages.
    pub rest_keyword: &'static str,
    pub min_items: Option<usize>,
    pub max_items: Option<usize>,
    pub unique: bool,
}

#[derive(Debug, Clone, Default)]
pub(super) struct NumberKeywords {
    pub minimum: Vec<Bound>,
    pub maximum: Vec<Bound>,
    /// The divisor with the number as written, for messages.
    pub multiple_of: Option<(Decimal, String)>,
}

/// `minimum`, `exclusiveMinimum`, … with the number as written, for messages.
#[derive(Debug, Clone)]
pub(super) struct Bound {
    pub value: Num,
    pub exclusive: bool,
    pub keyword: &'static str,
    pub text: String,
}

#[derive(Debug, Clone, Default)]
pub(super) struct StringKeywords {
    pub min_length: Option<usize>,
    pub max_length: Option<usize>,
    pub pattern: Option<(Arc<Pattern>, String)>,
}
