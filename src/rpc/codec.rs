//! `google.protobuf.Struct` <-> JSON, for the `application/proto` codec.
//!
//! The JSON codec never goes through here: its documents stay JSON text end to end. Proto
//! Struct numbers are doubles; integral ones become JSON integers (as JavaScript prints
//! them), so a document written over proto reads back the same over JSON.

use prost_types::value::Kind;
use prost_types::{ListValue, Struct, Value};
use serde_json::{Map, Number, Value as Json};

/// Deepest nesting accepted in either direction (protobuf decoding stops at 100 anyway).
const MAX_DEPTH: usize = 100;

/// A Struct as a JSON object. Fails on NaN/infinite numbers, which JSON cannot express.
pub fn struct_to_json(s: &Struct) -> Result<Json, String> {
    fields_to_json(s, 0)
}

fn fields_to_json(s: &Struct, depth: usize) -> Result<Json, String> {
    if depth > MAX_DEPTH {
        return Err("value nested too deeply".into());
    }
    let mut map = Map::with_capacity(s.fields.len());
    for (k, v) in &s.fields {
        map.insert(k.clone(), value_to_json(v, depth + 1)?);
    }
    Ok(Json::Object(map))
}

fn value_to_json(v: &Value, depth: usize) -> Result<Json, String> {
    if depth > MAX_DEPTH {
        return Err("value nested too deeply".into());
    }
    Ok(match &v.kind {
        None | Some(Kind::NullValue(_)) => Json::Null,
        Some(Kind::NumberValue(n)) => number(*n)?,
        Some(Kind::StringValue(s)) => Json::String(s.clone()),
        Some(Kind::BoolValue(b)) => Json::Bool(*b),
        Some(Kind::StructValue(s)) => fields_to_json(s, depth + 1)?,
        Some(Kind::ListValue(l)) => Json::Array(
            l.values
                .iter()
                .map(|v| value_to_json(v, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
    })
}

fn number(n: f64) -> Result<Json, String> {
    if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
        return Ok(Json::Number(Number::from(n as i64)));
    }
    Number::from_f64(n)
        .map(Json::Number)
        .ok_or_else(|| format!("number {n} cannot be represented in JSON"))
}

/// A JSON object as a Struct; `None` if `json` is not an object.
pub fn json_to_struct(json: &Json) -> Option<Struct> {
    match json {
        Json::Object(map) => Some(Struct {
            fields: map
                .iter()
                .map(|(k, v)| (k.clone(), json_to_value(v)))
                .collect(),
        }),
        _ => None,
    }
}

fn json_to_value(v: &Json) -> Value {
    let kind = match v {
        Json::Null => Kind::NullValue(0),
        Json::Bool(b) => Kind::BoolValue(*b),
        Json::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(f64::NAN)),
        Json::String(s) => Kind::StringValue(s.clone()),
        Json::Array(a) => Kind::ListValue(ListValue {
            values: a.iter().map(json_to_value).collect(),
        }),
        Json::Object(_) => Kind::StructValue(json_to_struct(v).expect("is an object")),
    };
    Value { kind: Some(kind) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_survives_a_struct_round_trip_with_integers_intact() {
        let json: Json = serde_json::from_str(
            r#"{"a":1780000000000,"b":1.5,"c":[null,true,"x",{"d":-3}],"e":{}}"#,
        )
        .unwrap();
        let back = struct_to_json(&json_to_struct(&json).unwrap()).unwrap();
        assert_eq!(back, json);
        assert_eq!(
            back.to_string(),
            r#"{"a":1780000000000,"b":1.5,"c":[null,true,"x",{"d":-3}],"e":{}}"#
        );
    }

    #[test]
    fn non_finite_numbers_are_refused() {
        let s = Struct {
            fields: [(
                "x".to_string(),
                Value {
                    kind: Some(Kind::NumberValue(f64::NAN)),
                },
            )]
            .into_iter()
            .collect(),
        };
        assert!(struct_to_json(&s).is_err());
    }
}
