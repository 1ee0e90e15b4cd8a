//! A focused JSON Schema validator for tool arguments and results.
//!
//! Why not the `jsonschema` crate: with `default-features = false` it still brings 46 crates
//! this daemon does not otherwise build (a bignum stack, fancy-regex, URI and email parsers,
//! a second `syn`), about a minute of extra cold build on a 2-core machine, for a full
//! draft 4-2020 implementation whose remote references and formats tool schemas do not use.
//! Tool schemas are small, hand-written objects; the subset below covers what they contain,
//! and its messages are written for the model that has to fix its arguments.
//!
//! Supported (draft 2020-12 meaning, with the draft 4-7 spellings where they differ):
//! - any value: `type` (one or a list; `integer` is a number without a fraction), `enum`,
//!   `const`, `anyOf`, `oneOf`, `allOf`, `not`, `if`/`then`/`else`, `$ref` to a JSON pointer
//!   in the same schema (`#`, `#/$defs/x`, `#/definitions/x`), boolean schemas;
//! - objects: `properties`, `required`, `additionalProperties` (bool or schema),
//!   `patternProperties`, `propertyNames`, `minProperties`, `maxProperties`,
//!   `dependentRequired`;
//! - arrays: `items` (a schema, or a list as draft 4-2019 tuples), `prefixItems`,
//!   `additionalItems`, `minItems`, `maxItems`, `uniqueItems`;
//! - numbers: `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` (number, or the
//!   draft 4 boolean), `multipleOf`;
//! - strings: `minLength`, `maxLength` (in Unicode code points), `pattern` (see
//!   [`pattern`]: ECMA-262 syntax without backreferences or lookaround).
//!
//! Annotations (`title`, `description`, `default`, `examples`, `format`, `$schema`, `$id`,
//! `$comment`, `deprecated`, `readOnly`, `writeOnly`, `content*`) and unknown keywords are
//! ignored, as the spec says. The validation keywords this subset lacks (`contains`,
//! `minContains`, `maxContains`, `dependentSchemas`, `dependencies`, `unevaluated*`,
//! `$dynamicRef`, `$recursiveRef`, remote `$ref`, a nested `$id`) make [`Schema::compile`]
//! fail, naming the keyword's JSON pointer, so a tool whose schema cannot be enforced is
//! refused at startup instead of being called with arguments nobody checked.
//!
//! How: [`compile`] turns the document into the typed form of [`node`] once (references
//! resolved to nodes, patterns compiled, bounds parsed; every keyword either compiled or
//! refused, wherever it sits, a `$ref` target included) and [`validate`] walks only that
//! form. Numbers compare exactly ([`number`]): `multipleOf` is decided on decimals, not with
//! a tolerance. A violation names the JSON pointer of the failing value and the keyword:
//! `/items/2: 7 is not a multiple of 3 (multipleOf)`; a call is told about a few at most.

use std::fmt;

use serde_json::Value;

mod compile;
mod node;
mod number;
pub mod pattern;
mod validate;

use node::Compiled;
use validate::{Path, Sink, Validator};

/// A schema checked and ready to validate against.
#[derive(Debug, Clone)]
pub struct Schema {
    root: Value,
    compiled: Compiled,
}

/// Why a schema cannot be used; `path` is a JSON pointer into the schema (`#/properties/a`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at {path:?}: {message}")]
pub struct SchemaError {
    pub path: String,
    pub message: String,
}

/// One way an instance fails a schema: where (a JSON pointer into the instance, `""` for the
/// instance itself), which keyword, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub pointer: String,
    pub keyword: &'static str,
    pub message: String,
}

/// The ways an instance fails a schema: the first few, described, and how many more there
/// were. `Display` lists them for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violations {
    pub shown: Vec<Violation>,
    pub more: usize,
}

/// Violations described per call; the rest are counted. A model fixes a few at a time, and a
/// long list buries the first.
const MAX_SHOWN: usize = 5;
/// Violations counted before validation stops (bounds the work on a hostile instance).
const MAX_COUNTED: usize = 1000;

impl Schema {
    /// Checks a schema (keyword shapes, local references, patterns) and compiles it.
    pub fn compile(root: Value) -> Result<Schema, SchemaError> {
        let compiled = compile::compile(&root)?;
        Ok(Schema { root, compiled })
    }

    /// The schema as given.
    pub fn as_value(&self) -> &Value {
        &self.root
    }

    /// Validates `instance`, describing the first few problems.
    pub fn validate(&self, instance: &Value) -> Result<(), Violations> {
        let mut sink = Sink::full(MAX_SHOWN, MAX_COUNTED);
        self.run(instance, &mut sink);
        if sink.count == 0 {
            Ok(())
        } else {
            let more = sink.count - sink.out.len();
            Err(Violations {
                shown: sink.out,
                more,
            })
        }
    }

    /// Whether `instance` is valid, without describing why not (stops at the first problem).
    pub fn is_valid(&self, instance: &Value) -> bool {
        let mut sink = Sink::probe();
        self.run(instance, &mut sink);
        sink.count == 0
    }

    fn run(&self, instance: &Value, sink: &mut Sink) {
        let v = Validator {
            compiled: &self.compiled,
        };
        v.check(0, instance, &mut Path::default(), sink, 0);
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() {
            "(root)"
        } else {
            &self.pointer
        };
        write!(f, "{at}: {} ({})", self.message, self.keyword)
    }
}

impl fmt::Display for Violations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, v) in self.shown.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{v}")?;
        }
        match self.more {
            0 => Ok(()),
            1 => f.write_str("; and 1 more problem"),
            n if n + self.shown.len() >= MAX_COUNTED => {
                write!(f, "; and at least {n} more problems")
            }
            n => write!(f, "; and {n} more problems"),
        }
    }
}

#[cfg(test)]
mod tests;
