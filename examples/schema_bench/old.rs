// The validator callbackd had before issue 13 (commit 85115d4, src/tools/schema.rs), kept
// verbatim (tests dropped) as the baseline of the schema micro-benchmark. Not used by the
// daemon.
#![allow(dead_code)]

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
//!   [`pattern`](super::pattern): ECMA-262 syntax without backreferences or lookaround).
//!
//! Annotations (`title`, `description`, `default`, `examples`, `format`, `$schema`, `$id`,
//! `$comment`, `deprecated`, `readOnly`, `writeOnly`, `content*`) and unknown keywords are
//! ignored, as the spec says. The validation keywords this subset lacks (`contains`,
//! `minContains`, `maxContains`, `dependentSchemas`, `dependencies`, `unevaluated*`,
//! `$dynamicRef`, `$recursiveRef`, remote `$ref`) make [`Schema::compile`] fail, so a tool
//! whose schema cannot be enforced is refused at startup instead of being called with
//! arguments nobody checked.

use std::collections::HashMap;
use std::fmt;

use serde_json::{Map, Value};

use callbackd::tools::schema::pattern::Pattern;

/// A schema checked and ready to validate against.
#[derive(Debug, Clone)]
pub struct Schema {
    root: Value,
    patterns: HashMap<String, Pattern>,
}

/// Why a schema cannot be used; `path` is a JSON pointer into the schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at {path:?}: {message}")]
pub struct SchemaError {
    pub path: String,
    pub message: String,
}

/// One way an instance fails a schema: where (`args.city`, `args.items[2]`) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub path: String,
    pub message: String,
}

/// The ways an instance fails a schema (at least one). `Display` lists them for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violations(pub Vec<Violation>);

/// Violations collected per validation, at most; the rest are counted, not described.
const MAX_VIOLATIONS: usize = 20;
/// Violations shown in a message.
const MAX_SHOWN: usize = 8;
/// Nesting of subschemas (through `$ref` included) followed before giving up.
const MAX_DEPTH: usize = 64;

const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "format",
    "$schema",
    "$id",
    "$anchor",
    "$comment",
    "$vocabulary",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentMediaType",
    "contentEncoding",
    "contentSchema",
];

const UNSUPPORTED: &[&str] = &[
    "contains",
    "minContains",
    "maxContains",
    "dependentSchemas",
    "dependencies",
    "unevaluatedProperties",
    "unevaluatedItems",
    "$dynamicRef",
    "$dynamicAnchor",
    "$recursiveRef",
    "$recursiveAnchor",
];

const TYPES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "integer", "string",
];

impl Schema {
    /// Checks a schema (keyword shapes, local references, patterns) and prepares it.
    pub fn compile(root: Value) -> Result<Schema, SchemaError> {
        let mut patterns = HashMap::new();
        check_schema(&root, &root, "", &mut patterns, 0)?;
        Ok(Schema { root, patterns })
    }

    /// The schema as given.
    pub fn as_value(&self) -> &Value {
        &self.root
    }

    /// Validates `instance`; `root` names it in messages (`"args"`, `"result"`).
    pub fn validate(&self, instance: &Value, root: &str) -> Result<(), Violations> {
        let mut v = Validator {
            schema: self,
            out: Vec::new(),
            overflow: 0,
        };
        v.check(&self.root, instance, &mut Path::new(root), 0);
        if v.out.is_empty() {
            Ok(())
        } else {
            if v.overflow > 0 {
                v.out.push(Violation {
                    path: root.to_string(),
                    message: format!("and {} more problems", v.overflow),
                });
            }
            Err(Violations(v.out))
        }
    }
}

impl fmt::Display for Violations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, v) in self.0.iter().take(MAX_SHOWN).enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{}: {}", v.path, v.message)?;
        }
        if self.0.len() > MAX_SHOWN {
            write!(f, "; and {} more", self.0.len() - MAX_SHOWN)?;
        }
        Ok(())
    }
}

// ---- checking the schema itself ----

fn schema_err(path: &str, message: impl Into<String>) -> SchemaError {
    SchemaError {
        path: if path.is_empty() {
            "#".into()
        } else {
            format!("#{path}")
        },
        message: message.into(),
    }
}

fn check_schema(
    root: &Value,
    schema: &Value,
    path: &str,
    patterns: &mut HashMap<String, Pattern>,
    depth: usize,
) -> Result<(), SchemaError> {
    if depth > MAX_DEPTH {
        return Err(schema_err(path, "schema is nested too deeply"));
    }
    let obj = match schema {
        Value::Bool(_) => return Ok(()),
        Value::Object(obj) => obj,
        _ => return Err(schema_err(path, "a schema must be an object or a boolean")),
    };
    for (key, value) in obj {
        let here = format!("{path}/{}", escape_pointer(key));
        let sub = |v: &Value, p: &str, patterns: &mut HashMap<String, Pattern>| {
            check_schema(root, v, p, patterns, depth + 1)
        };
        match key.as_str() {
            k if ANNOTATIONS.contains(&k) => {}
            k if UNSUPPORTED.contains(&k) => {
                return Err(schema_err(
                    &here,
                    format!("the keyword {k:?} is not supported by callbackd's validator"),
                ))
            }
            "type" => {
                let names: Vec<&Value> = match value {
                    Value::Array(list) if !list.is_empty() => list.iter().collect(),
                    Value::String(_) => vec![value],
                    _ => {
                        return Err(schema_err(
                            &here,
                            "must be a type name or a non-empty list of them",
                        ))
                    }
                };
                for name in names {
                    if !name.as_str().is_some_and(|n| TYPES.contains(&n)) {
                        return Err(schema_err(
                            &here,
                            format!("unknown type {name}; expected one of {}", TYPES.join(", ")),
                        ));
                    }
                }
            }
            "enum" if !value.is_array() => {
                return Err(schema_err(&here, "must be an array"));
            }
            "const" => {}
            "properties" | "patternProperties" | "$defs" | "definitions" => {
                let map = value
                    .as_object()
                    .ok_or_else(|| schema_err(&here, "must be an object of schemas"))?;
                for (name, s) in map {
                    if key == "patternProperties" {
                        compile_pattern(name, &here, patterns)?;
                    }
                    sub(s, &format!("{here}/{}", escape_pointer(name)), patterns)?;
                }
            }
            "required" => string_list(value, &here)?,
            "dependentRequired" => {
                let map = value
                    .as_object()
                    .ok_or_else(|| schema_err(&here, "must be an object of string lists"))?;
                for (name, list) in map {
                    string_list(list, &format!("{here}/{}", escape_pointer(name)))?;
                }
            }
            "additionalProperties"
            | "propertyNames"
            | "additionalItems"
            | "not"
            | "if"
            | "then"
            | "else" => sub(value, &here, patterns)?,
            "items" => match value {
                Value::Array(list) => {
                    for (i, s) in list.iter().enumerate() {
                        sub(s, &format!("{here}/{i}"), patterns)?;
                    }
                }
                _ => sub(value, &here, patterns)?,
            },
            "prefixItems" | "anyOf" | "oneOf" | "allOf" => {
                let list = value
                    .as_array()
                    .filter(|l| !l.is_empty())
                    .ok_or_else(|| schema_err(&here, "must be a non-empty array of schemas"))?;
                for (i, s) in list.iter().enumerate() {
                    sub(s, &format!("{here}/{i}"), patterns)?;
                }
            }
            "minimum" | "maximum" if !value.is_number() => {
                return Err(schema_err(&here, "must be a number"));
            }
            "exclusiveMinimum" | "exclusiveMaximum"
                if !value.is_number() && !value.is_boolean() =>
            {
                return Err(schema_err(&here, "must be a number"));
            }
            "multipleOf" if !value.as_f64().is_some_and(|m| m > 0.0) => {
                return Err(schema_err(&here, "must be a number greater than 0"));
            }
            "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties"
            | "maxProperties"
                if count(value).is_none() =>
            {
                return Err(schema_err(&here, "must be a non-negative integer"));
            }
            "uniqueItems" if !value.is_boolean() => {
                return Err(schema_err(&here, "must be a boolean"));
            }
            "pattern" => {
                let src = value
                    .as_str()
                    .ok_or_else(|| schema_err(&here, "must be a string"))?;
                compile_pattern(src, &here, patterns)?;
            }
            "$ref" => {
                let target = value
                    .as_str()
                    .ok_or_else(|| schema_err(&here, "must be a string"))?;
                if resolve_ref(root, target).is_none() {
                    return Err(schema_err(
                        &here,
                        format!(
                            "cannot resolve {target:?}: only references into the same schema \
                             (\"#\", \"#/$defs/name\") are supported"
                        ),
                    ));
                }
            }
            // Valid values of the keywords above, and unknown keywords (annotations).
            _ => {}
        }
    }
    Ok(())
}

fn string_list(value: &Value, path: &str) -> Result<(), SchemaError> {
    match value {
        Value::Array(list) if list.iter().all(Value::is_string) => Ok(()),
        _ => Err(schema_err(path, "must be an array of strings")),
    }
}

fn compile_pattern(
    src: &str,
    path: &str,
    patterns: &mut HashMap<String, Pattern>,
) -> Result<(), SchemaError> {
    if !patterns.contains_key(src) {
        let p = Pattern::new(src)
            .map_err(|e| schema_err(path, format!("pattern {src:?} cannot be used: {e}")))?;
        patterns.insert(src.to_string(), p);
    }
    Ok(())
}

fn count(v: &Value) -> Option<usize> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                    .map(|f| f as u64)
            })
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        _ => None,
    }
}

/// A `$ref` into the same document: `#` or `#/json/pointer`.
fn resolve_ref<'a>(root: &'a Value, target: &str) -> Option<&'a Value> {
    let pointer = target.strip_prefix('#')?;
    let pointer = percent_decode(pointer)?;
    root.pointer(&pointer)
}

fn percent_decode(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_string());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn escape_pointer(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

// ---- validating an instance ----

/// Where in the instance a check is, rendered for the model: `args.city`, `args.tags[2]`,
/// `args["odd key"]`.
struct Path {
    parts: Vec<String>,
}

impl Path {
    fn new(root: &str) -> Self {
        Path {
            parts: vec![root.to_string()],
        }
    }

    fn key(&mut self, key: &str) {
        let plain = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
            && !key.starts_with(|c: char| c.is_ascii_digit());
        self.parts.push(if plain {
            format!(".{key}")
        } else {
            format!("[{}]", Value::String(key.to_string()))
        });
    }

    fn index(&mut self, i: usize) {
        self.parts.push(format!("[{i}]"));
    }

    fn pop(&mut self) {
        self.parts.pop();
    }

    fn render(&self) -> String {
        self.parts.concat()
    }
}

struct Validator<'s> {
    schema: &'s Schema,
    out: Vec<Violation>,
    overflow: usize,
}

impl<'s> Validator<'s> {
    fn report(&mut self, path: &Path, message: String) {
        if self.out.len() < MAX_VIOLATIONS {
            self.out.push(Violation {
                path: path.render(),
                message,
            });
        } else {
            self.overflow += 1;
        }
    }

    /// Validates against `schema` in a fresh collector; used by the combinators.
    fn trial(&self, schema: &Value, instance: &Value, path: &Path, depth: usize) -> Vec<Violation> {
        let mut v = Validator {
            schema: self.schema,
            out: Vec::new(),
            overflow: 0,
        };
        let mut p = Path {
            parts: path.parts.clone(),
        };
        v.check(schema, instance, &mut p, depth);
        v.out
    }

    fn check(&mut self, schema: &'s Value, inst: &Value, path: &mut Path, depth: usize) {
        if depth > MAX_DEPTH {
            self.report(path, "the schema is nested too deeply to check".into());
            return;
        }
        let obj = match schema {
            Value::Bool(true) => return,
            Value::Bool(false) => {
                self.report(path, "no value is allowed here".into());
                return;
            }
            Value::Object(obj) => obj,
            _ => return,
        };
        if let Some(target) = obj.get("$ref").and_then(Value::as_str) {
            if let Some(target) = resolve_ref(&self.schema.root, target) {
                self.check(target, inst, path, depth + 1);
            }
        }
        if let Some(types) = obj.get("type") {
            if !type_matches(types, inst) {
                let expected = match types {
                    Value::Array(list) => list
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(" or "),
                    other => other.as_str().unwrap_or("?").to_string(),
                };
                self.report(path, format!("expected {expected}, got {}", describe(inst)));
                // Every other keyword would only restate the type mismatch.
                return;
            }
        }
        if let Some(Value::Array(options)) = obj.get("enum") {
            if !options.iter().any(|o| json_eq(o, inst)) {
                let shown: Vec<String> = options.iter().take(20).map(Value::to_string).collect();
                let more = if options.len() > 20 { ", …" } else { "" };
                self.report(
                    path,
                    format!(
                        "must be one of {}{more}; got {}",
                        shown.join(", "),
                        describe(inst)
                    ),
                );
            }
        }
        if let Some(c) = obj.get("const") {
            if !json_eq(c, inst) {
                self.report(path, format!("must be exactly {c}; got {}", describe(inst)));
            }
        }
        match inst {
            Value::Object(map) => self.check_object(obj, map, path, depth),
            Value::Array(items) => self.check_array(obj, items, path, depth),
            Value::String(s) => self.check_string(obj, s, path),
            Value::Number(_) => self.check_number(obj, inst, path),
            _ => {}
        }
        self.check_combinators(obj, inst, path, depth);
    }

    fn check_object(
        &mut self,
        obj: &'s Map<String, Value>,
        map: &Map<String, Value>,
        path: &mut Path,
        depth: usize,
    ) {
        if let Some(Value::Array(required)) = obj.get("required") {
            let missing: Vec<&str> = required
                .iter()
                .filter_map(Value::as_str)
                .filter(|name| !map.contains_key(*name))
                .collect();
            match missing.as_slice() {
                [] => {}
                [one] => self.report(path, format!("missing required property {one:?}")),
                many => self.report(
                    path,
                    format!(
                        "missing required properties {}",
                        many.iter()
                            .map(|n| format!("{n:?}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ),
            }
        }
        if let Some(Value::Object(deps)) = obj.get("dependentRequired") {
            for (name, needs) in deps {
                if !map.contains_key(name) {
                    continue;
                }
                for need in needs
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                {
                    if !map.contains_key(need) {
                        self.report(
                            path,
                            format!("property {need:?} is required when {name:?} is present"),
                        );
                    }
                }
            }
        }
        if let Some(n) = obj.get("minProperties").and_then(count) {
            if map.len() < n {
                self.report(
                    path,
                    format!("must have at least {n} properties; has {}", map.len()),
                );
            }
        }
        if let Some(n) = obj.get("maxProperties").and_then(count) {
            if map.len() > n {
                self.report(
                    path,
                    format!("must have at most {n} properties; has {}", map.len()),
                );
            }
        }
        let properties = obj.get("properties").and_then(Value::as_object);
        let pattern_props = obj.get("patternProperties").and_then(Value::as_object);
        let additional = obj.get("additionalProperties");
        let names = obj.get("propertyNames");
        for (key, value) in map {
            if let Some(names) = names {
                let problems = self.trial(names, &Value::String(key.clone()), path, depth + 1);
                if let Some(first) = problems.first() {
                    self.report(path, format!("property name {key:?} {}", first.message));
                }
            }
            let mut matched = false;
            path.key(key);
            if let Some(s) = properties.and_then(|p| p.get(key)) {
                matched = true;
                self.check(s, value, path, depth + 1);
            }
            for (src, s) in pattern_props.into_iter().flatten() {
                if self
                    .schema
                    .patterns
                    .get(src)
                    .is_some_and(|p| p.is_match(key))
                {
                    matched = true;
                    self.check(s, value, path, depth + 1);
                }
            }
            path.pop();
            match additional {
                Some(_) if matched => {}
                Some(Value::Bool(false)) => {
                    let allowed: Vec<String> = properties
                        .map(|p| p.keys().map(|k| format!("{k:?}")).collect())
                        .unwrap_or_default();
                    let hint = if allowed.is_empty() {
                        String::new()
                    } else {
                        format!(" (allowed: {})", allowed.join(", "))
                    };
                    self.report(path, format!("unexpected property {key:?}{hint}"));
                }
                Some(s) => {
                    path.key(key);
                    self.check(s, value, path, depth + 1);
                    path.pop();
                }
                None => {}
            }
        }
    }

    fn check_array(
        &mut self,
        obj: &'s Map<String, Value>,
        items: &[Value],
        path: &mut Path,
        depth: usize,
    ) {
        if let Some(n) = obj.get("minItems").and_then(count) {
            if items.len() < n {
                self.report(
                    path,
                    format!("must have at least {n} items; has {}", items.len()),
                );
            }
        }
        if let Some(n) = obj.get("maxItems").and_then(count) {
            if items.len() > n {
                self.report(
                    path,
                    format!("must have at most {n} items; has {}", items.len()),
                );
            }
        }
        if obj.get("uniqueItems") == Some(&Value::Bool(true)) {
            'outer: for i in 0..items.len() {
                for j in i + 1..items.len() {
                    if json_eq(&items[i], &items[j]) {
                        self.report(
                            path,
                            format!("items must be unique, but items {i} and {j} are equal"),
                        );
                        break 'outer;
                    }
                }
            }
        }
        // 2020-12: prefixItems + items; draft 4-2019: items as a list + additionalItems.
        let (tuple, rest): (&[Value], Option<&Value>) =
            match (obj.get("prefixItems"), obj.get("items")) {
                (Some(Value::Array(prefix)), rest) => (prefix, rest),
                (_, Some(Value::Array(prefix))) => (prefix, obj.get("additionalItems")),
                (_, rest) => (&[], rest),
            };
        for (i, item) in items.iter().enumerate() {
            let schema = match tuple.get(i) {
                Some(s) => s,
                None => match rest {
                    Some(Value::Bool(false)) => {
                        self.report(
                            path,
                            format!(
                                "must have at most {} items; has {}",
                                tuple.len(),
                                items.len()
                            ),
                        );
                        break;
                    }
                    Some(s) => s,
                    None => break,
                },
            };
            path.index(i);
            self.check(schema, item, path, depth + 1);
            path.pop();
        }
    }

    fn check_string(&mut self, obj: &Map<String, Value>, s: &str, path: &Path) {
        let len = || s.chars().count();
        if let Some(n) = obj.get("minLength").and_then(count) {
            if len() < n {
                self.report(
                    path,
                    format!("must be at least {n} characters long; is {}", len()),
                );
            }
        }
        if let Some(n) = obj.get("maxLength").and_then(count) {
            if len() > n {
                self.report(
                    path,
                    format!("must be at most {n} characters long; is {}", len()),
                );
            }
        }
        if let Some(src) = obj.get("pattern").and_then(Value::as_str) {
            if let Some(p) = self.schema.patterns.get(src) {
                if !p.is_match(s) {
                    self.report(
                        path,
                        format!("must match the pattern {src:?}; got {}", describe_str(s)),
                    );
                }
            }
        }
    }

    fn check_number(&mut self, obj: &Map<String, Value>, inst: &Value, path: &Path) {
        let Some(x) = inst.as_f64() else { return };
        let bound = |k: &str| obj.get(k).and_then(Value::as_f64);
        let flag = |k: &str| obj.get(k) == Some(&Value::Bool(true));
        if let Some(min) = bound("minimum") {
            if flag("exclusiveMinimum") && x <= min {
                self.report(
                    path,
                    format!("must be greater than {}; got {inst}", num(min)),
                );
            } else if x < min {
                self.report(path, format!("must be at least {}; got {inst}", num(min)));
            }
        }
        if let Some(max) = bound("maximum") {
            if flag("exclusiveMaximum") && x >= max {
                self.report(path, format!("must be less than {}; got {inst}", num(max)));
            } else if x > max {
                self.report(path, format!("must be at most {}; got {inst}", num(max)));
            }
        }
        if let Some(min) = bound("exclusiveMinimum") {
            if x <= min {
                self.report(
                    path,
                    format!("must be greater than {}; got {inst}", num(min)),
                );
            }
        }
        if let Some(max) = bound("exclusiveMaximum") {
            if x >= max {
                self.report(path, format!("must be less than {}; got {inst}", num(max)));
            }
        }
        if let Some(m) = bound("multipleOf") {
            let q = x / m;
            if (q - q.round()).abs() > 1e-9 * q.abs().max(1.0) {
                self.report(
                    path,
                    format!("must be a multiple of {}; got {inst}", num(m)),
                );
            }
        }
    }

    fn check_combinators(
        &mut self,
        obj: &'s Map<String, Value>,
        inst: &Value,
        path: &mut Path,
        depth: usize,
    ) {
        if let Some(Value::Array(all)) = obj.get("allOf") {
            for s in all {
                self.check(s, inst, path, depth + 1);
            }
        }
        for (key, exactly_one) in [("anyOf", false), ("oneOf", true)] {
            let Some(Value::Array(options)) = obj.get(key) else {
                continue;
            };
            let results: Vec<Vec<Violation>> = options
                .iter()
                .map(|s| self.trial(s, inst, path, depth + 1))
                .collect();
            let matching: Vec<usize> = (0..results.len())
                .filter(|&i| results[i].is_empty())
                .collect();
            if matching.is_empty() {
                let why: Vec<String> = results
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        let first = &r[0];
                        let at = if first.path == path.render() {
                            String::new()
                        } else {
                            format!("{}: ", first.path)
                        };
                        format!("option {}: {at}{}", i + 1, first.message)
                    })
                    .collect();
                self.report(
                    path,
                    format!(
                        "does not match any of the {} allowed forms ({key}): {}",
                        options.len(),
                        why.join(" | ")
                    ),
                );
            } else if exactly_one && matching.len() > 1 {
                let which: Vec<String> = matching.iter().map(|i| (i + 1).to_string()).collect();
                self.report(
                    path,
                    format!(
                        "matches {} of the forms in oneOf (options {}), but must match exactly one",
                        matching.len(),
                        which.join(", ")
                    ),
                );
            }
        }
        if let Some(not) = obj.get("not") {
            if self.trial(not, inst, path, depth + 1).is_empty() {
                self.report(path, "matches a schema it must not match (\"not\")".into());
            }
        }
        if let Some(cond) = obj.get("if") {
            let branch = if self.trial(cond, inst, path, depth + 1).is_empty() {
                obj.get("then")
            } else {
                obj.get("else")
            };
            if let Some(branch) = branch {
                self.check(branch, inst, path, depth + 1);
            }
        }
    }
}

fn type_matches(types: &Value, inst: &Value) -> bool {
    let one = |t: &str| match t {
        "null" => inst.is_null(),
        "boolean" => inst.is_boolean(),
        "object" => inst.is_object(),
        "array" => inst.is_array(),
        "number" => inst.is_number(),
        "string" => inst.is_string(),
        "integer" => match inst {
            Value::Number(n) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        },
        _ => false,
    };
    match types {
        Value::String(t) => one(t),
        Value::Array(list) => list.iter().filter_map(Value::as_str).any(one),
        _ => true,
    }
}

/// JSON equality where `1` and `1.0` are the same number.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
                (Some(x), Some(y), _, _) => x == y,
                (_, _, Some(x), Some(y)) => x == y,
                _ => x.as_f64() == y.as_f64(),
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// A short description of a value for messages: `number 42`, `string "abc"`, `object`.
fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => format!("string {}", describe_str(s)),
        Value::Array(a) => format!("an array of {} items", a.len()),
        Value::Object(_) => "an object".into(),
    }
}

fn describe_str(s: &str) -> String {
    const MAX: usize = 60;
    if s.chars().count() <= MAX {
        format!("{s:?}")
    } else {
        let cut: String = s.chars().take(MAX).collect();
        format!("{cut:?}… ({} characters)", s.chars().count())
    }
}

/// A number as a schema author wrote it (`3`, not `3.0`).
fn num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        x.to_string()
    }
}
