//! The config reference (`callbackd print-config`, `config/callbackd.example.toml`), written
//! from the config types themselves: their JSON Schema (`schemars`) gives every section and
//! key, its `///` comment as the description, and its default (the `Default` impls,
//! serialized). A key without a default (a secret, an optional path) is printed commented
//! out, with its `#[schemars(example = ...)]` value. Tables that are lists or maps
//! (`[[tools.command]]`, `[tools.limits.NAME]`, `[[namespaces]]`) are printed as a commented
//! example; their descriptions are `# # ` lines, so removing the first `# ` of every line
//! of such a block gives valid TOML with comments.
//!
//! Regenerate the example after changing a config type:
//! `cargo run -q -- print-config > config/callbackd.example.toml`.

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

use super::field_order::field_order;
use super::Config;

/// The whole reference, as `callbackd print-config` prints it.
pub fn reference() -> String {
    let root = schema();
    let root = root.as_value();
    let mut out = String::new();
    comment(&mut out, "# ", description(root));
    for (name, field) in properties(root, "") {
        out.push('\n');
        table(&mut out, name, field, false);
    }
    out
}

/// [`Config`]'s JSON Schema, every type inlined: the one source of the reference, so a
/// section added to `Config` (a field with its `JsonSchema` type) appears in it with no
/// other change.
fn schema() -> schemars::Schema {
    SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .into_generator()
        .into_root_schema_for::<Config>()
}

/// A table's description: its field's, else its type's.
fn own_description<'a>(field: &'a Value, schema: &'a Value) -> &'a str {
    if description(field).is_empty() {
        description(schema)
    } else {
        description(field)
    }
}

/// For a key whose default depends on the machine (`store.path`): printed commented out,
/// its description says what the default is.
pub(super) fn no_default(schema: &mut schemars::Schema) {
    schema.remove("default");
}

/// How a key is written in TOML.
enum Kind<'a> {
    /// `[name]` (an optional table too: `Option<BridgeConfig>`).
    Table(&'a Value, bool),
    /// `[[name]]`.
    Array(&'a Value),
    /// `[name.NAME]`.
    Map(&'a Value),
    Scalar,
}

fn kind(schema: &Value) -> Kind<'_> {
    if let Some(t) = object(schema) {
        return Kind::Table(t, t != schema);
    }
    if let Some(t) = schema.get("items").and_then(object) {
        return Kind::Array(t);
    }
    if let Some(t) = schema.get("additionalProperties").and_then(object) {
        return Kind::Map(t);
    }
    Kind::Scalar
}

/// The schema of a table: `schema` itself, or its non-null alternative (an `Option`).
fn object(schema: &Value) -> Option<&Value> {
    if schema.get("properties").is_some() {
        return Some(schema);
    }
    ["anyOf", "oneOf"]
        .iter()
        .filter_map(|k| schema.get(*k)?.as_array())
        .flatten()
        .find(|s| s.get("properties").is_some())
}

/// The keys of the table at `path` (dotted; "" for the file), in the order their struct
/// declares them (the schema's own order is alphabetical); any key serde does not list
/// comes last.
fn properties<'a>(schema: &'a Value, path: &str) -> Vec<(&'a String, &'a Value)> {
    let path: Vec<&str> = path.split('.').filter(|p| !p.is_empty()).collect();
    let order = field_order::<Config>(&path).unwrap_or_default();
    let mut keys: Vec<(&String, &Value)> = schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(Map::iter)
        .collect();
    keys.sort_by_key(|(k, _)| order.iter().position(|o| o == k).unwrap_or(usize::MAX));
    keys
}

fn description(schema: &Value) -> &str {
    schema
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Each line of `text` as a comment starting with `prefix`.
fn comment(out: &mut String, prefix: &str, text: &str) {
    for line in text.lines() {
        out.push_str(prefix.trim_end());
        if !line.is_empty() {
            out.push(' ');
            out.push_str(line);
        }
        out.push('\n');
    }
}

/// One table at `path`, described by its field's schema; `commented`: inside a commented
/// example (or one itself).
fn table(out: &mut String, path: &str, field: &Value, commented: bool) {
    let (schema, header, commented) = match kind(field) {
        Kind::Table(t, optional) => (t, format!("[{path}]"), commented || optional),
        Kind::Array(t) => (t, format!("[[{path}]]"), true),
        Kind::Map(t) => (t, format!("[{path}.NAME]"), true),
        Kind::Scalar => return,
    };
    let own = own_description(field, schema);
    let lead = if commented { "# " } else { "" };
    comment(out, "#", own);
    out.push_str(&format!("{lead}{header}\n"));
    let mut nested = Vec::new();
    for (key, value) in properties(schema, path) {
        if matches!(kind(value), Kind::Scalar) {
            key_line(out, key, value, commented);
        } else {
            nested.push((key, value));
        }
    }
    for (key, value) in nested {
        out.push('\n');
        table(out, &format!("{path}.{key}"), value, commented);
    }
}

/// One key: its description, then `key = default`, or commented out with an example.
fn key_line(out: &mut String, key: &str, schema: &Value, commented: bool) {
    let text_prefix = if commented { "# #" } else { "#" };
    comment(out, text_prefix, description(schema));
    for (value, text) in variants(schema) {
        comment(out, text_prefix, &format!("  {value}: {text}"));
    }
    let default = schema.get("default").filter(|v| !v.is_null());
    let example = schema
        .get("examples")
        .and_then(Value::as_array)
        .and_then(|e| e.first());
    let (value, lead) = match (commented, default, example) {
        (false, Some(d), _) => (toml_value(d), ""),
        (true, _, Some(e)) | (true, Some(e), None) => (toml_value(e), "# "),
        (false, None, Some(e)) => (toml_value(e), "# "),
        (_, None, None) => (placeholder(schema).to_string(), "# "),
    };
    out.push_str(&format!("{lead}{key} = {value}\n"));
}

/// The documented values of an enum key: (`"normal"`, its description's first line).
fn variants(schema: &Value) -> Vec<(String, String)> {
    let alternatives = ["oneOf", "anyOf"]
        .iter()
        .filter_map(|k| schema.get(*k)?.as_array())
        .flatten();
    let mut out = Vec::new();
    for v in alternatives {
        let text = description(v);
        let value = v
            .get("const")
            .or_else(|| v.get("enum").and_then(|e| e.get(0)));
        if let (Some(value), false) = (value, text.is_empty()) {
            out.push((toml_value(value), text.replace('\n', "\n    ")));
        }
    }
    out
}

fn toml_value(v: &Value) -> String {
    match toml::Value::try_from(v) {
        Ok(t) => t.to_string(),
        Err(_) => v.to_string(),
    }
}

/// A value of the key's type, for a key with neither default nor example.
fn placeholder(schema: &Value) -> &'static str {
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    if types.contains(&"integer") {
        "0"
    } else if types.contains(&"boolean") {
        "false"
    } else if types.contains(&"array") {
        "[]"
    } else {
        "\"...\""
    }
}

#[cfg(test)]
#[path = "reference_tests.rs"]
mod tests;
