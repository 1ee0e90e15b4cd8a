use serde_json::json;

use super::*;

#[allow(clippy::needless_pass_by_value)] // json! literals read best passed by value
fn errors(schema: Value, instance: Value) -> String {
    Schema::compile(schema)
        .expect("schema compiles")
        .validate(&instance)
        .expect_err("instance is invalid")
        .to_string()
}

#[allow(clippy::needless_pass_by_value)]
fn ok(schema: Value, instance: Value) {
    let s = Schema::compile(schema).expect("schema compiles");
    if let Err(v) = s.validate(&instance) {
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
        "/city: expected string, got number 42 (type)"
    );
    assert_eq!(
        errors(weather(), json!({})),
        "(root): missing required property \"city\" (required)"
    );
    assert_eq!(
        errors(weather(), json!({"city": "Paris", "town": "x"})),
        "(root): unexpected property \"town\" (allowed: \"city\", \"days\", \"units\") \
         (additionalProperties)"
    );
    assert_eq!(
        errors(weather(), json!({"city": "Paris", "units": "k"})),
        "/units: must be one of \"c\", \"f\"; got string \"k\" (enum)"
    );
    assert_eq!(
        errors(weather(), json!({"city": "", "days": 9})),
        "/city: must be at least 1 characters long; is 0 (minLength); /days: must be at most 7; \
         got 9 (maximum)"
    );
    assert_eq!(
        errors(weather(), json!({"city": "Paris", "days": 1.5})),
        "/days: expected integer, got number 1.5 (type)"
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
        "/tags/1: expected string, got number 1 (type)"
    );
    assert_eq!(
        errors(schema.clone(), json!({"tags": ["a", "a"]})),
        "/tags: items must be unique, but items 0 and 1 are equal (uniqueItems)"
    );
    assert_eq!(
        errors(schema.clone(), json!({"odd key": {"n": 0.3}})),
        "/odd key/n: 0.3 is not a multiple of 0.5 (multipleOf)"
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
        "(root): does not match any of the 2 allowed forms: option 1: expected string, got \
         number -1 (type) | option 2: must be at least 0; got -1 (minimum) (anyOf)"
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
        "/at: must have at most 2 items; has 3 (items)"
    );
    assert_eq!(
        errors(schema.clone(), json!({"mode": "fast"})),
        "(root): missing required property \"at\" (required)"
    );
    assert_eq!(
        errors(schema, json!({"mode": "slow", "at": [1, 2]})),
        "/mode: must be exactly \"fast\"; got string \"slow\" (const)"
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
        "/id: \"nope\" does not match the pattern \"^[a-f0-9]{8}$\" (pattern)"
    );
    assert!(errors(schema.clone(), json!({"Bad": 1}))
        .contains("property name \"Bad\": \"Bad\" does not match"));
    assert_eq!(
        errors(schema, json!({"x-n": 1})),
        "/x-n: expected string, got number 1 (type)"
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
        "(root): no value is allowed here (false)"
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
    assert!(msg.contains("/0: expected string"), "{msg}");
    assert!(msg.contains("more"), "{msg}");
    assert!(msg.len() < 1000, "{msg}");
}

// ---- the two holes of issue 13 ----

#[test]
fn multiple_of_one_refuses_a_tiny_fraction() {
    let s = Schema::compile(json!({"multipleOf": 1})).expect("schema compiles");
    assert!(
        s.validate(&json!(1e-10)).is_err(),
        "1e-10 is not a multiple of 1"
    );
    assert!(s.validate(&json!(3)).is_ok());
}

#[test]
fn a_pattern_behind_a_local_ref_is_enforced() {
    let s = Schema::compile(json!({
        "x": {"type": "string", "pattern": "^[a-z]+$"},
        "$ref": "#/x"
    }))
    .expect("schema compiles");
    assert!(s.validate(&json!("abc")).is_ok());
    assert!(
        s.validate(&json!("ABC")).is_err(),
        "the pattern is enforced"
    );
    let s = Schema::compile(json!({
        "$defs": {"x": {"pattern": "^[a-z]+$"}},
        "properties": {"p": {"$ref": "#/$defs/x"}}
    }))
    .expect("schema compiles");
    assert!(
        s.validate(&json!({"p": "ABC"})).is_err(),
        "the pattern is enforced"
    );
}

#[test]
fn unsupported_keywords_behind_a_ref_are_refused() {
    let e = Schema::compile(json!({"x": {"contains": {}}, "$ref": "#/x"})).unwrap_err();
    assert_eq!(e.path, "#/x/contains");
}

// ---- compiled form ----

#[test]
fn a_violation_names_the_pointer_of_the_value_and_the_keyword() {
    let schema = json!({"properties": {"items": {"items": {"multipleOf": 3}}}});
    assert_eq!(
        errors(schema, json!({"items": [3, 6, 7]})),
        "/items/2: 7 is not a multiple of 3 (multipleOf)"
    );
    let schema = json!({"properties": {"a/b": {"properties": {"~": {"type": "null"}}}}});
    assert_eq!(
        errors(schema, json!({"a/b": {"~": 1}})),
        "/a~1b/~0: expected null, got number 1 (type)"
    );
}

#[test]
fn a_call_is_told_about_a_few_problems_and_how_many_more() {
    let schema = json!({"items": {"type": "string"}});
    let v = Schema::compile(schema)
        .unwrap()
        .validate(&json!((0..50).collect::<Vec<_>>()))
        .unwrap_err();
    assert_eq!(v.shown.len(), MAX_SHOWN);
    assert_eq!(v.more, 50 - MAX_SHOWN);
    assert!(v.to_string().ends_with("; and 45 more problems"), "{v}");
}

#[test]
fn recursive_schemas_follow_the_instance_and_endless_cycles_are_refused() {
    let tree = json!({
        "$defs": {"node": {"type": "object", "properties": {
            "v": {"type": "integer"},
            "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}
        }}},
        "$ref": "#/$defs/node"
    });
    ok(
        tree.clone(),
        json!({"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}]}),
    );
    assert_eq!(
        errors(tree, json!({"v": 1, "kids": [{"kids": [{"v": "x"}]}]})),
        "/kids/0/kids/0/v: expected integer, got string \"x\" (type)"
    );
    let e = Schema::compile(json!({"$ref": "#"})).unwrap_err();
    assert!(e.message.contains("never end"), "{e}");
    let e = Schema::compile(json!({
        "$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}]}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}},
        "properties": {"x": {"$ref": "#/$defs/a"}}
    }))
    .unwrap_err();
    assert!(e.message.contains("never end"), "{e}");
}

#[test]
fn refused_keywords_are_named_by_their_pointer_wherever_they_are() {
    for (schema, at) in [
        (
            json!({"$defs": {"x": {"items": {"unevaluatedItems": false}}}, "$ref": "#/$defs/x"}),
            "#/$defs/x/items/unevaluatedItems",
        ),
        (
            json!({"vendor": {"deep": {"dependentSchemas": {}}}, "properties": {"a": {"$ref": "#/vendor/deep"}}}),
            "#/vendor/deep/dependentSchemas",
        ),
        (
            json!({"properties": {"a": {"$id": "other", "type": "string"}}}),
            "#/properties/a/$id",
        ),
        (json!({"multipleOf": 0}), "#/multipleOf"),
        (json!({"$ref": "#/nowhere"}), "#/$ref"),
    ] {
        let e = Schema::compile(schema.clone()).expect_err(&schema.to_string());
        assert_eq!(e.path, at, "{schema}: {e}");
    }
}

#[test]
fn numbers_are_exact_at_the_edges() {
    ok(json!({"multipleOf": 0.1}), json!(0.3));
    ok(json!({"multipleOf": 0.01}), json!(19.99));
    assert!(errors(json!({"multipleOf": 0.01}), json!(19.999)).contains("multipleOf"));
    ok(json!({"multipleOf": 1e-300}), json!(1e300));
    // 2^53 + 1 is not an f64; the bound is still exact.
    assert!(errors(
        json!({"maximum": 9_007_199_254_740_992u64}),
        json!(9_007_199_254_740_993u64)
    )
    .contains("maximum"));
    ok(json!({"type": "integer", "minimum": 1}), json!(1.0));
    ok(
        json!({"enum": [9_007_199_254_740_993u64]}),
        json!(9_007_199_254_740_993u64),
    );
    assert!(errors(
        json!({"enum": [9_007_199_254_740_993u64]}),
        json!(9_007_199_254_740_992.0)
    )
    .contains("enum"));
}

#[test]
fn draft_4_tuples_and_their_additional_items() {
    let schema = json!({"items": [{"type": "string"}], "additionalItems": {"type": "integer"}});
    ok(schema.clone(), json!(["a", 1, 2]));
    assert_eq!(
        errors(schema, json!(["a", "b"])),
        "/1: expected integer, got string \"b\" (type)"
    );
    let schema = json!({"items": [{"type": "string"}], "additionalItems": false});
    assert_eq!(
        errors(schema, json!(["a", "b"])),
        "(root): must have at most 1 items; has 2 (additionalItems)"
    );
}

#[test]
fn the_deepest_arguments_json_can_carry_are_checked_within_a_small_stack() {
    // serde_json stops parsing at 128 levels; a recursive schema that goes through anyOf at
    // every level is the deepest walk a call can cause. Checked on a 1 MiB stack (tokio's
    // workers have 2 MiB) in whatever profile the tests are built in.
    let schema = Schema::compile(json!({
        "$defs": {"n": {"anyOf": [{"type": "array", "items": {"$ref": "#/$defs/n"}}, {"type": "integer"}]}},
        "$ref": "#/$defs/n"
    }))
    .unwrap();
    let text = format!("{}1{}", "[".repeat(126), "]".repeat(126));
    let deep: Value = serde_json::from_str(&text).unwrap();
    let bad: Value = serde_json::from_str(&text.replace('1', "\"x\"")).unwrap();
    let (ok, err) = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || (schema.validate(&deep), schema.validate(&bad)))
        .unwrap()
        .join()
        .unwrap();
    assert!(ok.is_ok(), "{ok:?}");
    let err = err.unwrap_err().to_string();
    assert!(err.contains("anyOf"), "{err}");
}
