//! The reference's own check: every key a person can set has its description.

use super::*;

/// The keys and tables (dotted paths) whose description is missing: a test keeps this
/// empty, so every key a person can set says what it does.
fn undescribed() -> Vec<String> {
    fn walk(schema: &Value, path: &str, out: &mut Vec<String>) {
        for (key, field) in properties(schema, path) {
            let path = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            let (Kind::Table(t, _) | Kind::Array(t) | Kind::Map(t)) = kind(field) else {
                if description(field).trim().is_empty() {
                    out.push(path);
                }
                continue;
            };
            // A table's text may start with its header (`[tools]`: ...): what follows counts.
            let own = own_description(field, t);
            let text = match own.split_once("]`") {
                Some((head, rest)) if head.starts_with("`[") => rest,
                _ => own,
            };
            if text.trim_matches([':', ' ', '\n']).is_empty() {
                out.push(format!("[{path}]"));
            }
            walk(t, &path, out);
        }
    }
    let root = schema();
    let mut out = Vec::new();
    walk(root.as_value(), "", &mut out);
    out
}

#[test]
fn every_key_and_table_of_the_reference_has_a_description() {
    let missing = undescribed();
    assert!(
        missing.is_empty(),
        "config keys without a `///` description (it is their line in print-config): {missing:?}"
    );
}
