//! From a schema document to its [`Compiled`] form, once, when the tool is registered.
//!
//! Every subschema is compiled where it sits (`properties`, `$defs`, `items`, …) and every
//! `$ref` target is compiled as a schema too, wherever it points (even into a place no
//! keyword describes, such as an unknown `"x": {…}` member). A target and the place it sits
//! share one node, keyed by its JSON pointer, so a keyword is checked the same way whether
//! it is reached directly or by reference, and a keyword the validator cannot enforce is
//! refused wherever a reference could reach it.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::node::{
    ArrayKeywords, Bound, Compiled, Keywords, Node, NodeId, NumberKeywords, ObjectKeywords,
    StringKeywords, Types,
};
use super::number::{Decimal, Num};
use super::pattern::Pattern;
use super::SchemaError;

/// Nesting of subschemas followed before giving up (a stack bound; JSON parsing already
/// stops at 128 levels).
const MAX_DEPTH: usize = 64;

pub(super) const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "format",
    "$schema",
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

pub(super) const UNSUPPORTED: &[&str] = &[
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

pub(super) fn compile(root: &Value) -> Result<Compiled, SchemaError> {
    let mut c = Compiler {
        root,
        nodes: Vec::new(),
        pointers: Vec::new(),
        at: HashMap::new(),
        queue: Vec::new(),
        patterns: HashMap::new(),
    };
    c.compile_at(root, "", 0)?;
    while let Some((id, pointer)) = c.queue.pop() {
        if c.nodes[id].is_none() {
            // Resolved when the reference was compiled.
            let target = root.pointer(&pointer).unwrap_or(&Value::Bool(true));
            c.compile_at(target, &pointer, 0)?;
        }
    }
    let nodes: Vec<Node> = c
        .nodes
        .into_iter()
        .map(|n| n.unwrap_or(Node::Any))
        .collect();
    refuse_endless_cycles(&nodes, &c.pointers)?;
    Ok(Compiled { nodes })
}

/// `items` as a schema (2020-12) or as a list of schemas (draft 4-2019 tuples).
enum Items {
    One(NodeId),
    List(Vec<NodeId>),
}

struct Compiler<'r> {
    root: &'r Value,
    /// `None` until compiled (a reference can name a node before it is reached).
    nodes: Vec<Option<Node>>,
    /// Where each node sits in the document (a JSON pointer), for messages.
    pointers: Vec<String>,
    at: HashMap<String, NodeId>,
    /// References whose targets still have to be compiled.
    queue: Vec<(NodeId, String)>,
    patterns: HashMap<String, Arc<Pattern>>,
}

pub(super) fn schema_err(path: &str, message: impl Into<String>) -> SchemaError {
    SchemaError {
        path: format!("#{path}"),
        message: message.into(),
    }
}

impl Compiler<'_> {
    fn id_for(&mut self, pointer: &str) -> NodeId {
        if let Some(&id) = self.at.get(pointer) {
            return id;
        }
        let id = self.nodes.len();
        self.nodes.push(None);
        self.pointers.push(pointer.to_string());
        self.at.insert(pointer.to_string(), id);
        id
    }

    fn compile_at(
        &mut self,
        schema: &Value,
        path: &str,
        depth: usize,
    ) -> Result<NodeId, SchemaError> {
        let id = self.id_for(path);
        if self.nodes[id].is_some() {
            return Ok(id);
        }
        // A placeholder while the node's own subschemas are compiled.
        self.nodes[id] = Some(Node::Any);
        let node = self.build(schema, path, depth)?;
        self.nodes[id] = Some(node);
        Ok(id)
    }

    fn sub(&mut self, schema: &Value, path: &str, depth: usize) -> Result<NodeId, SchemaError> {
        self.compile_at(schema, path, depth + 1)
    }

    fn sub_list(
        &mut self,
        value: &Value,
        here: &str,
        depth: usize,
    ) -> Result<Vec<NodeId>, SchemaError> {
        let list = value
            .as_array()
            .filter(|l| !l.is_empty())
            .ok_or_else(|| schema_err(here, "must be a non-empty array of schemas"))?;
        list.iter()
            .enumerate()
            .map(|(i, s)| self.sub(s, &format!("{here}/{i}"), depth))
            .collect()
    }

    fn sub_map(
        &mut self,
        value: &Value,
        here: &str,
        depth: usize,
    ) -> Result<Vec<(String, NodeId)>, SchemaError> {
        let map = value
            .as_object()
            .ok_or_else(|| schema_err(here, "must be an object of schemas"))?;
        let mut out = Vec::with_capacity(map.len());
        for (name, s) in map {
            let id = self.sub(s, &format!("{here}/{}", escape_pointer(name)), depth)?;
            out.push((name.clone(), id));
        }
        Ok(out)
    }

    fn pattern(&mut self, src: &str, here: &str) -> Result<Arc<Pattern>, SchemaError> {
        if let Some(p) = self.patterns.get(src) {
            return Ok(p.clone());
        }
        let p = Pattern::new(src)
            .map_err(|e| schema_err(here, format!("pattern {src:?} cannot be used: {e}")))?;
        let p = Arc::new(p);
        self.patterns.insert(src.to_string(), p.clone());
        Ok(p)
    }

    fn build(&mut self, schema: &Value, path: &str, depth: usize) -> Result<Node, SchemaError> {
        if depth > MAX_DEPTH {
            return Err(schema_err(path, "schema is nested too deeply"));
        }
        let obj = match schema {
            Value::Bool(true) => return Ok(Node::Any),
            Value::Bool(false) => return Ok(Node::Never),
            Value::Object(obj) => obj,
            _ => return Err(schema_err(path, "a schema must be an object or a boolean")),
        };
        let mut k = Keywords::default();
        let mut object = ObjectKeywords::default();
        let mut array = ArrayKeywords::default();
        let mut number = NumberKeywords::default();
        let mut string = StringKeywords::default();
        let (mut items, mut prefix_items, mut additional_items) = (None, None, None);
        let (mut cond_if, mut cond_then, mut cond_else) = (None, None, None);
        for (key, value) in obj {
            let here = format!("{path}/{}", escape_pointer(key));
            match key.as_str() {
                k if ANNOTATIONS.contains(&k) => {}
                k if UNSUPPORTED.contains(&k) => {
                    return Err(schema_err(
                        &here,
                        format!("the keyword {k:?} is not supported by callbackd's validator"),
                    ))
                }
                "$id" if !path.is_empty() => {
                    return Err(schema_err(
                        &here,
                        "a nested \"$id\" changes what \"$ref\" resolves against; callbackd's \
                         validator does not support it",
                    ))
                }
                "$id" => {}
                "type" => k.types = Some(types(value, &here)?),
                "enum" => {
                    let list = value
                        .as_array()
                        .ok_or_else(|| schema_err(&here, "must be an array"))?;
                    k.enumeration = Some(list.clone());
                }
                "const" => k.constant = Some(value.clone()),
                "properties" => {
                    let mut props = self.sub_map(value, &here, depth)?;
                    props.sort_by(|a, b| a.0.cmp(&b.0));
                    object.properties = props;
                }
                "patternProperties" => {
                    for (src, id) in self.sub_map(value, &here, depth)? {
                        let p = self.pattern(&src, &here)?;
                        object.pattern_properties.push((p, src, id));
                    }
                }
                "$defs" | "definitions" => {
                    self.sub_map(value, &here, depth)?;
                }
                "required" => object.required = string_list(value, &here)?,
                "dependentRequired" => {
                    let map = value
                        .as_object()
                        .ok_or_else(|| schema_err(&here, "must be an object of string lists"))?;
                    for (name, list) in map {
                        let needs = string_list(list, &format!("{here}/{}", escape_pointer(name)))?;
                        object.dependent_required.push((name.clone(), needs));
                    }
                }
                "additionalProperties" => {
                    object.additional_false = value == &Value::Bool(false);
                    object.additional = Some(self.sub(value, &here, depth)?);
                }
                "propertyNames" => object.property_names = Some(self.sub(value, &here, depth)?),
                "minProperties" => object.min_properties = Some(count(value, &here)?),
                "maxProperties" => object.max_properties = Some(count(value, &here)?),
                "items" => {
                    items = Some(match value {
                        Value::Array(_) => Items::List(self.sub_list(value, &here, depth)?),
                        _ => Items::One(self.sub(value, &here, depth)?),
                    });
                    if matches!(value, Value::Array(_)) && obj.contains_key("prefixItems") {
                        return Err(schema_err(
                            &here,
                            "must be a schema when \"prefixItems\" is given",
                        ));
                    }
                }
                "prefixItems" => prefix_items = Some(self.sub_list(value, &here, depth)?),
                "additionalItems" => additional_items = Some(self.sub(value, &here, depth)?),
                "minItems" => array.min_items = Some(count(value, &here)?),
                "maxItems" => array.max_items = Some(count(value, &here)?),
                "uniqueItems" => {
                    array.unique = value
                        .as_bool()
                        .ok_or_else(|| schema_err(&here, "must be a boolean"))?;
                }
                "minimum" => number.minimum.push(bound(
                    value,
                    &here,
                    obj.get("exclusiveMinimum") == Some(&Value::Bool(true)),
                    "minimum",
                )?),
                "maximum" => number.maximum.push(bound(
                    value,
                    &here,
                    obj.get("exclusiveMaximum") == Some(&Value::Bool(true)),
                    "maximum",
                )?),
                // The draft 4 boolean modifies minimum/maximum (above).
                "exclusiveMinimum" | "exclusiveMaximum" if !value.is_boolean() => {
                    let b = bound(value, &here, true, exclusive(key))?;
                    if key == "exclusiveMinimum" {
                        number.minimum.push(b);
                    } else {
                        number.maximum.push(b);
                    }
                }
                "exclusiveMinimum" | "exclusiveMaximum" => {}
                "multipleOf" => {
                    let n = value.as_number().map(Num::of);
                    let d = n.and_then(Decimal::of).filter(|d| !d.is_zero());
                    match (n, d) {
                        (Some(n), Some(d)) if n.cmp(Num::Int(0)).is_some_and(|o| o.is_gt()) => {
                            number.multiple_of = Some((d, value.to_string()));
                        }
                        _ => return Err(schema_err(&here, "must be a number greater than 0")),
                    }
                }
                "minLength" => string.min_length = Some(count(value, &here)?),
                "maxLength" => string.max_length = Some(count(value, &here)?),
                "pattern" => {
                    let src = value
                        .as_str()
                        .ok_or_else(|| schema_err(&here, "must be a string"))?;
                    string.pattern = Some((self.pattern(src, &here)?, src.to_string()));
                }
                "allOf" => k.all_of = self.sub_list(value, &here, depth)?,
                "anyOf" => k.any_of = self.sub_list(value, &here, depth)?,
                "oneOf" => k.one_of = self.sub_list(value, &here, depth)?,
                "not" => k.not = Some(self.sub(value, &here, depth)?),
                "if" => cond_if = Some(self.sub(value, &here, depth)?),
                "then" => cond_then = Some(self.sub(value, &here, depth)?),
                "else" => cond_else = Some(self.sub(value, &here, depth)?),
                "$ref" => k.reference = Some(self.reference(value, &here)?),
                // Unknown keywords are annotations (the spec says to ignore them).
                _ => {}
            }
        }
        // 2020-12: prefixItems + items; draft 4-2019: items as a list + additionalItems.
        match (prefix_items, items) {
            (Some(prefix), rest) => {
                array.prefix = prefix;
                array.rest = match rest {
                    Some(Items::One(id)) => Some(id),
                    _ => None,
                };
                array.rest_keyword = "items";
            }
            (None, Some(Items::List(prefix))) => {
                array.prefix = prefix;
                array.rest = additional_items;
                array.rest_keyword = "additionalItems";
            }
            (None, Some(Items::One(rest))) => {
                array.rest = Some(rest);
                array.rest_keyword = "items";
            }
            (None, None) => {}
        }
        k.condition = cond_if.map(|c| (c, cond_then, cond_else));
        if !object.is_empty() {
            k.object = Some(Box::new(object));
        }
        if !array.is_empty() {
            k.array = Some(Box::new(array));
        }
        if !number.minimum.is_empty() || !number.maximum.is_empty() || number.multiple_of.is_some()
        {
            k.number = Some(Box::new(number));
        }
        if string.min_length.is_some() || string.max_length.is_some() || string.pattern.is_some() {
            k.string = Some(Box::new(string));
        }
        Ok(if k.is_empty() {
            Node::Any
        } else {
            Node::Keywords(Box::new(k))
        })
    }

    /// A `$ref` into the same document: `#` or `#/json/pointer` (percent-encoded or not).
    fn reference(&mut self, value: &Value, here: &str) -> Result<NodeId, SchemaError> {
        let target = value
            .as_str()
            .ok_or_else(|| schema_err(here, "must be a string"))?;
        let pointer = target
            .strip_prefix('#')
            .and_then(crate::percent::decode)
            .filter(|p| p.is_empty() || p.starts_with('/'))
            .filter(|p| self.root.pointer(p).is_some())
            .ok_or_else(|| {
                schema_err(
                    here,
                    format!(
                        "cannot resolve {target:?}: only references into the same schema \
                         (\"#\", \"#/$defs/name\") are supported"
                    ),
                )
            })?;
        let id = self.id_for(&pointer);
        if self.nodes[id].is_none() {
            self.queue.push((id, pointer));
        }
        Ok(id)
    }
}

impl Keywords {
    fn is_empty(&self) -> bool {
        self.reference.is_none()
            && self.types.is_none()
            && self.enumeration.is_none()
            && self.constant.is_none()
            && self.object.is_none()
            && self.array.is_none()
            && self.number.is_none()
            && self.string.is_none()
            && self.all_of.is_empty()
            && self.any_of.is_empty()
            && self.one_of.is_empty()
            && self.not.is_none()
            && self.condition.is_none()
    }
}

impl ObjectKeywords {
    fn is_empty(&self) -> bool {
        self.properties.is_empty()
            && self.pattern_properties.is_empty()
            && self.additional.is_none()
            && self.property_names.is_none()
            && self.required.is_empty()
            && self.dependent_required.is_empty()
            && self.min_properties.is_none()
            && self.max_properties.is_none()
    }
}

impl ArrayKeywords {
    fn is_empty(&self) -> bool {
        self.prefix.is_empty()
            && self.rest.is_none()
            && self.min_items.is_none()
            && self.max_items.is_none()
            && !self.unique
    }
}

/// A cycle of references and combinators that never moves into the instance (`{"$ref": "#"}`
/// at the root, two `$defs` naming each other in `allOf`) would recurse forever on any
/// instance: refuse it instead.
fn refuse_endless_cycles(nodes: &[Node], pointers: &[String]) -> Result<(), SchemaError> {
    fn same_instance(node: &Node) -> Vec<NodeId> {
        let Node::Keywords(k) = node else {
            return Vec::new();
        };
        let mut out: Vec<NodeId> = k.reference.into_iter().collect();
        out.extend(&k.all_of);
        out.extend(&k.any_of);
        out.extend(&k.one_of);
        out.extend(k.not);
        if let Some((c, t, e)) = k.condition {
            out.push(c);
            out.extend(t);
            out.extend(e);
        }
        out
    }
    // 0 = unvisited, 1 = on the stack, 2 = done. Iterative, so a long chain cannot overflow.
    let mut state = vec![0u8; nodes.len()];
    for start in 0..nodes.len() {
        if state[start] != 0 {
            continue;
        }
        let mut stack = vec![(start, same_instance(&nodes[start]), 0usize)];
        state[start] = 1;
        while let Some((node, next, i)) = stack.last_mut() {
            if let Some(&n) = next.get(*i) {
                *i += 1;
                match state[n] {
                    0 => {
                        state[n] = 1;
                        let edges = same_instance(&nodes[n]);
                        stack.push((n, edges, 0));
                    }
                    1 => {
                        return Err(schema_err(
                            &pointers[n],
                            "this schema refers back to itself without moving into the \
                             instance (through $ref, allOf, anyOf, oneOf, not or if/then/else), \
                             so checking it would never end",
                        ))
                    }
                    _ => {}
                }
            } else {
                state[*node] = 2;
                stack.pop();
            }
        }
    }
    Ok(())
}

fn types(value: &Value, here: &str) -> Result<Types, SchemaError> {
    let names: Vec<&Value> = match value {
        Value::Array(list) if !list.is_empty() => list.iter().collect(),
        Value::String(_) => vec![value],
        _ => {
            return Err(schema_err(
                here,
                "must be a type name or a non-empty list of them",
            ))
        }
    };
    let mut bits = 0;
    for name in names {
        match Types::NAMES.iter().find(|(n, _)| Some(*n) == name.as_str()) {
            Some((_, bit)) => bits |= bit,
            None => {
                let known: Vec<&str> = Types::NAMES.iter().map(|(n, _)| *n).collect();
                return Err(schema_err(
                    here,
                    format!("unknown type {name}; expected one of {}", known.join(", ")),
                ));
            }
        }
    }
    Ok(Types(bits))
}

fn exclusive(key: &str) -> &'static str {
    if key == "exclusiveMinimum" {
        "exclusiveMinimum"
    } else {
        "exclusiveMaximum"
    }
}

fn bound(
    value: &Value,
    here: &str,
    exclusive: bool,
    keyword: &'static str,
) -> Result<Bound, SchemaError> {
    let n = value
        .as_number()
        .ok_or_else(|| schema_err(here, "must be a number"))?;
    Ok(Bound {
        value: Num::of(n),
        exclusive,
        keyword,
        text: n.to_string(),
    })
}

fn string_list(value: &Value, path: &str) -> Result<Vec<String>, SchemaError> {
    match value {
        Value::Array(list) => list
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| schema_err(path, "must be an array of strings")),
        _ => Err(schema_err(path, "must be an array of strings")),
    }
}

/// A non-negative integer (`2` or `2.0`), saturated to `usize`.
fn count(v: &Value, here: &str) -> Result<usize, SchemaError> {
    let n = v.as_number().map(Num::of);
    match n {
        Some(Num::Int(i)) if i >= 0 => Ok(usize::try_from(i).unwrap_or(usize::MAX)),
        Some(n @ Num::Float(f)) if n.is_integer() && f >= 0.0 => Ok(if f >= usize::MAX as f64 {
            usize::MAX
        } else {
            f as usize
        }),
        _ => Err(schema_err(here, "must be a non-negative integer")),
    }
}

pub(super) fn escape_pointer(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}
