//! Differential test of callbackd's schema validator against an independent implementation,
//! the Python `jsonschema` package (pinned in tests/e2e/setup.sh; see oracle.py for how it is
//! set to judge JSON numbers and ECMA-262 patterns as JSON Schema means them).
//!
//! Seeded schemas within the supported subset, instances near their edges (gen.rs); both
//! validators judge every pair, and any disagreement fails the test with the smallest schema
//! and instance that still disagree (shrink.rs). Every disagreement ever found is kept in
//! corpus.json and checked on every run, with the oracle or without.
//!
//! Sizes: `CALLBACKD_ORACLE_CASES` instances (4,000 here; `scripts/hardening` runs more) from
//! `CALLBACKD_ORACLE_SEED` (fixed here; the hardening run picks one and prints it). Without
//! a Python that has jsonschema the oracle test fails when `CI` or
//! `CALLBACKD_ORACLE_REQUIRED=1` is set (as `scripts/test` does) and says SKIPPED otherwise.

mod gen;
mod oracle;
mod shrink;

use callbackd::tools::schema::Schema;
use serde_json::{json, Value};

use gen::Gen;
use oracle::{Missing, Oracle};

const INSTANCES_PER_SCHEMA: usize = 8;
/// Disagreements collected (each shrunk) before the test stops and fails.
const MAX_REPORTED: usize = 3;

fn env_num(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        _ => default,
    }
}

fn required() -> bool {
    let set = |v: &str| std::env::var(v).is_ok_and(|x| !x.is_empty() && x != "0" && x != "false");
    set("CI") || set("CALLBACKD_ORACLE_REQUIRED")
}

fn oracle() -> Option<Oracle> {
    match Oracle::start() {
        Ok(o) => Some(o),
        Err(Missing(why)) if required() => {
            panic!("the jsonschema oracle is required here but missing: {why}")
        }
        Err(Missing(why)) => {
            eprintln!("SKIPPED: the differential schema test has no oracle: {why}");
            None
        }
    }
}

/// callbackd's verdict, checked to be the same through both entry points.
fn ours(schema: &Schema, instance: &Value) -> bool {
    let valid = schema.is_valid(instance);
    let described = schema.validate(instance);
    assert_eq!(
        valid,
        described.is_ok(),
        "is_valid and validate disagree on {instance} against {}: {described:?}",
        schema.as_value()
    );
    if let Err(v) = &described {
        assert!(!v.shown.is_empty(), "a refusal says why");
    }
    valid
}

fn disagrees(oracle: &mut Oracle, draft7: bool, schema: &Value, instance: &Value) -> bool {
    let Ok(compiled) = Schema::compile(schema.clone()) else {
        return false;
    };
    match oracle.judge(schema, draft7, std::slice::from_ref(instance)) {
        Ok(v) => v[0] != ours(&compiled, instance),
        Err(_) => false,
    }
}

/// JSON with every non-ASCII character escaped, so line separators and odd spaces show.
fn ascii(v: &Value) -> String {
    let mut out = String::new();
    for c in v.to_string().chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

#[test]
fn the_validator_agrees_with_the_jsonschema_oracle() {
    let Some(mut oracle) = oracle() else { return };
    let cases = env_num("CALLBACKD_ORACLE_CASES", 4000) as usize;
    let seed = env_num("CALLBACKD_ORACLE_SEED", 13);
    eprintln!(
        "schema oracle: jsonschema {}, {cases} instances, CALLBACKD_ORACLE_SEED={seed}",
        oracle.version
    );
    let mut gen = Gen::new(seed);
    let mut found: Vec<String> = Vec::new();
    let (mut judged, mut valid) = (0usize, 0usize);
    while judged < cases && found.len() < MAX_REPORTED {
        let schema = gen.document();
        let compiled = Schema::compile(schema.clone()).unwrap_or_else(|e| {
            panic!("a generated schema within the supported subset was refused: {e}\n{schema}")
        });
        let instances: Vec<Value> = (0..INSTANCES_PER_SCHEMA)
            .map(|_| gen.instance(&schema, &schema, 0))
            .collect();
        let theirs = oracle
            .judge(&schema, gen.draft7, &instances)
            .unwrap_or_else(|e| panic!("the oracle could not judge {schema}: {e}"));
        for (instance, theirs) in instances.iter().zip(theirs) {
            judged += 1;
            let mine = ours(&compiled, instance);
            valid += usize::from(mine);
            if mine != theirs {
                let draft7 = gen.draft7;
                let (s, i) = shrink::shrink(schema.clone(), instance.clone(), 5000, |s, i| {
                    disagrees(&mut oracle, draft7, s, i)
                });
                // The shrunk pair still disagrees, so the oracle's verdict is the other one.
                let mine = Schema::compile(s.clone()).is_ok_and(|c| ours(&c, &i));
                found.push(format!(
                    "callbackd says valid={mine}, jsonschema (draft {}) says valid={}\n  \
                     schema:   {}\n  instance: {}\n  corpus entry: {}",
                    if draft7 { "7" } else { "2020-12" },
                    !mine,
                    ascii(&s),
                    ascii(&i),
                    ascii(&json!({"note": "", "draft7": draft7, "schema": s, "instance": i, "valid": !mine}))
                ));
                break;
            }
        }
    }
    eprintln!("schema oracle: {judged} instances judged, {valid} valid");
    assert!(
        found.is_empty(),
        "{} disagreement(s) with jsonschema (CALLBACKD_ORACLE_SEED={seed}), smallest forms:\n{}",
        found.len(),
        found.join("\n")
    );
    // Both verdicts are common, so neither side can pass by always saying the same thing.
    assert!(
        valid * 10 > judged && valid * 10 < judged * 9,
        "{valid} of {judged} valid"
    );
}

#[test]
fn every_disagreement_found_so_far_stays_fixed() {
    let text = include_str!("corpus.json");
    let corpus: Vec<Value> = serde_json::from_str(text).expect("corpus.json is JSON");
    assert!(!corpus.is_empty());
    let mut oracle = Oracle::start().ok();
    for case in &corpus {
        let (schema, instance) = (&case["schema"], &case["instance"]);
        let want = case["valid"]
            .as_bool()
            .expect("each case says whether it is valid");
        let compiled = Schema::compile(schema.clone())
            .unwrap_or_else(|e| panic!("{}: schema refused: {e}", case["note"]));
        assert_eq!(
            ours(&compiled, instance),
            want,
            "{}: {instance} against {schema}",
            case["note"]
        );
        if let Some(o) = oracle.as_mut() {
            let draft7 = case["draft7"].as_bool().unwrap_or(false);
            let theirs = o.judge(schema, draft7, std::slice::from_ref(instance));
            assert_eq!(theirs, Ok(vec![want]), "the oracle on {}", case["note"]);
        }
    }
}
