use serde_json::json;

use super::*;

#[allow(clippy::needless_pass_by_value)] // json! literals read best passed by value
fn errors(schema: Value, instance: Value) -> String {
    Schema::compile(schema)
        .expect("schema compiles")
        .validate(&instance, "args")
        .expect_err("instance is invalid")
        .to_string()
}

#[allow(clippy::needless_pass_by_value)]
fn ok(schema: Value, instance: Value) {
    let s = Schema::compile(schema).expect("schema compiles");
    if let Err(v) = s.validate(&instance, "args") {
        panic!("{instance} should be valid: {v}");
    }
}

fn weather() -> Value {
    json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1},
            "units": {"enum": ["c", "f"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7}
        },
        "required": ["city"],
        "additionalProperties": false
    })
}

#[test]
fn a_matching_object_passes() {
    ok(weather(), json!({"city": "Paris", "units": "c", "days": 3}));
    ok(weather(), json!({"city": "Paris", "days": 3.0}));
}

#[test]
fn messages_name_the_place_and_the_problem() {
    assert_eq!(
        errors(weather(), json!({"city": 42})),
        "args.city: expected string, got number 42"
    );
    assert_eq!(
        errors(weather(), json!({})),
        "args: missing required property \"city\""
    );
    assert_eq!(
        errors(weather(), json!({"city": "Paris", "town": "x"})),
        "args: unexpected property \"town\" (allowed: \"city\", \"days\", \"units\")"
    );
    assert_eq!(
        errors(weather(), json!({"city": "Paris", "units": "k"})),
        "args.units: must be one of \"c\", \"f\"; got string \"k\""
    );
    assert_eq!(
        errors(weather(), json!({"city": "", "days": 9})),
        "args.city: must be at least 1 characters long; is 0; args.days: must be at most 7; got 9"
    );
    assert_eq!(
        errors(weather(), json!({"city": "Paris", "days": 1.5})),
        "args.days: expected integer, got number 1.5"
    );
}

#[test]
fn nested_arrays_and_odd_keys_are_located() {
    let schema = json!({
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3, "uniqueItems": true},
            "odd key": {"type": "object", "properties": {"n": {"type": "number", "multipleOf": 0.5}}}
        }
    });
    assert_eq!(
        errors(schema.clone(), json!({"tags": ["a", 1]})),
        "args.tags[1]: expected string, got number 1"
    );
    assert_eq!(
        errors(schema.clone(), json!({"tags": ["a", "a"]})),
        "args.tags: items must be unique, but items 0 and 1 are equal"
    );
    assert_eq!(
        errors(schema.clone(), json!({"odd key": {"n": 0.3}})),
        "args[\"odd key\"].n: must be a multiple of 0.5; got 0.3"
    );
    ok(schema, json!({"tags": [], "odd key": {"n": 1.5}}));
}

#[test]
fn any_of_and_one_of_explain_each_option() {
    let schema = json!({"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 0}]});
    ok(schema.clone(), json!("x"));
    ok(schema.clone(), json!(3));
    assert_eq!(
        errors(schema, json!(-1)),
        "args: does not match any of the 2 allowed forms (anyOf): option 1: expected string, \
         got number -1 | option 2: must be at least 0; got -1"
    );
    let schema = json!({"oneOf": [{"type": "number"}, {"type": "integer"}]});
    ok(schema.clone(), json!(1.5));
    assert!(errors(schema, json!(2)).contains("must match exactly one"));
}

#[test]
fn local_refs_tuples_and_conditionals_work() {
    let schema = json!({
        "$defs": {"point": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}], "items": false}},
        "type": "object",
        "properties": {"at": {"$ref": "#/$defs/point"}, "mode": {"const": "fast"}},
        "if": {"required": ["mode"]},
        "then": {"required": ["at"]}
    });
    ok(schema.clone(), json!({"at": [1, 2]}));
    ok(schema.clone(), json!({}));
    assert_eq!(
        errors(schema.clone(), json!({"at": [1, 2, 3]})),
        "args.at: must have at most 2 items; has 3"
    );
    assert_eq!(
        errors(schema.clone(), json!({"mode": "fast"})),
        "args: missing required property \"at\""
    );
    assert_eq!(
        errors(schema, json!({"mode": "slow", "at": [1, 2]})),
        "args.mode: must be exactly \"fast\"; got string \"slow\""
    );
}

#[test]
fn patterns_apply_to_values_and_property_names() {
    let schema = json!({
        "type": "object",
        "patternProperties": {"^x-": {"type": "string"}},
        "propertyNames": {"pattern": "^[a-z-]+$"},
        "additionalProperties": false,
        "properties": {"id": {"type": "string", "pattern": "^[a-f0-9]{8}$"}}
    });
    ok(schema.clone(), json!({"id": "deadbeef", "x-note": "hi"}));
    assert_eq!(
        errors(schema.clone(), json!({"id": "nope"})),
        "args.id: must match the pattern \"^[a-f0-9]{8}$\"; got \"nope\""
    );
    assert!(errors(schema.clone(), json!({"Bad": 1})).contains("property name \"Bad\" must match"));
    assert_eq!(
        errors(schema, json!({"x-n": 1})),
        "args[\"x-n\"]: expected string, got number 1"
    );
}

#[test]
fn numbers_compare_by_value() {
    ok(json!({"enum": [1, 2]}), json!(1.0));
    ok(json!({"const": {"a": [1.0]}}), json!({"a": [1]}));
    ok(json!({"exclusiveMinimum": 0}), json!(0.1));
    assert!(errors(json!({"exclusiveMinimum": 0}), json!(0)).contains("greater than 0"));
    assert!(
        errors(json!({"minimum": 0, "exclusiveMinimum": true}), json!(0))
            .contains("greater than 0")
    );
}

#[test]
fn boolean_schemas_and_not() {
    ok(json!(true), json!({"anything": 1}));
    assert_eq!(
        errors(json!(false), json!(1)),
        "args: no value is allowed here"
    );
    assert!(errors(json!({"not": {"type": "null"}}), json!(null)).contains("must not match"));
}

#[test]
fn schemas_the_validator_cannot_enforce_are_refused() {
    let e = Schema::compile(json!({"type": "array", "contains": {"type": "string"}})).unwrap_err();
    assert_eq!(e.path, "#/contains");
    assert!(e.message.contains("not supported"), "{e}");
    let e = Schema::compile(json!({"properties": {"a": {"$ref": "other.json#/x"}}})).unwrap_err();
    assert_eq!(e.path, "#/properties/a/$ref");
    let e = Schema::compile(json!({"type": "text"})).unwrap_err();
    assert!(e.message.contains("unknown type"), "{e}");
    let e = Schema::compile(json!({"pattern": "(a)\\1"})).unwrap_err();
    assert!(e.message.contains("backreferences"), "{e}");
    assert!(Schema::compile(json!("object")).is_err());
}

#[test]
fn annotations_and_unknown_keywords_are_ignored() {
    ok(
        json!({"title": "t", "format": "uri", "x-vendor": {"anything": true}, "description": "d"}),
        json!("not a uri"),
    );
}

#[test]
fn long_lists_of_problems_are_cut() {
    let schema = json!({"type": "array", "items": {"type": "string"}});
    let msg = errors(schema, json!((0..50).collect::<Vec<_>>()));
    assert!(msg.contains("args[0]: expected string"), "{msg}");
    assert!(msg.contains("more"), "{msg}");
    assert!(msg.len() < 1000, "{msg}");
}
