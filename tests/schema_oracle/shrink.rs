//! Greedy minimisation of a disagreement: keep taking one simplification of the schema or
//! the instance (drop a member or an item, replace a part by something plain) while the two
//! validators still disagree, so the case printed is small enough to read.

use serde_json::{json, Value};

/// One-step simplifications of `v`, bigger cuts first.
pub fn candidates(v: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    match v {
        Value::Object(m) => {
            for k in m.keys() {
                let mut c = m.clone();
                c.remove(k);
                out.push(Value::Object(c));
            }
            for (k, sub) in m {
                for s in candidates(sub) {
                    let mut c = m.clone();
                    c.insert(k.clone(), s);
                    out.push(Value::Object(c));
                }
            }
        }
        Value::Array(a) => {
            for i in 0..a.len() {
                let mut c = a.clone();
                c.remove(i);
                out.push(Value::Array(c));
            }
            for (i, sub) in a.iter().enumerate() {
                for s in candidates(sub) {
                    let mut c = a.clone();
                    c[i] = s;
                    out.push(Value::Array(c));
                }
            }
        }
        Value::String(s) if !s.is_empty() => {
            let mut chars: Vec<char> = s.chars().collect();
            chars.pop();
            out.push(json!(chars.into_iter().collect::<String>()));
        }
        _ => {}
    }
    for plain in [json!(true), json!(false), json!({}), json!(0), json!(null)] {
        if *v != plain && !matches!(v, Value::Null | Value::Bool(_)) {
            out.push(plain);
        }
    }
    out
}

/// Shrinks `(schema, instance)` while `disagrees` holds, within `budget` checks.
pub fn shrink(
    mut schema: Value,
    mut instance: Value,
    mut budget: usize,
    mut disagrees: impl FnMut(&Value, &Value) -> bool,
) -> (Value, Value) {
    'outer: loop {
        for c in candidates(&schema) {
            if budget == 0 {
                break 'outer;
            }
            budget -= 1;
            if disagrees(&c, &instance) {
                schema = c;
                continue 'outer;
            }
        }
        for c in candidates(&instance) {
            if budget == 0 {
                break 'outer;
            }
            budget -= 1;
            if disagrees(&schema, &c) {
                instance = c;
                continue 'outer;
            }
        }
        break;
    }
    (schema, instance)
}
