//! Micro-benchmark of tool-argument validation: the compiled validator of issue 13 against
//! the one it replaced (old.rs, verbatim), on the same schemas and arguments in the same run.
//!
//!     cargo run --release --example schema_bench [-- ROUNDS]
//!
//! Each workload is timed in alternating rounds (old, new, old, new, …) so that a noisy,
//! shared machine slows both alike; the figure is the median round in ns per call, and the
//! ratio new/old is the number to read. Both validators must give the same verdict on every
//! workload (checked before timing).

mod old;

use std::hint::black_box;
use std::time::Instant;

use callbackd::tools::schema::Schema;
use serde_json::{json, Value};

struct Workload {
    name: &'static str,
    schema: Value,
    args: Value,
}

fn workloads() -> Vec<Workload> {
    let weather = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1, "description": "City name"},
            "units": {"enum": ["c", "f"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7}
        },
        "required": ["city"],
        "additionalProperties": false
    });
    let memory = json!({
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["set", "get", "list", "delete"]},
            "key": {"type": "string", "minLength": 1, "maxLength": 128},
            "value": {"type": "string", "maxLength": 16384},
            "prefix": {"type": "string", "maxLength": 128}
        },
        "required": ["action"],
        "additionalProperties": false
    });
    let shell = json!({
        "type": "object",
        "$defs": {
            "path": {"type": "string", "pattern": "^[A-Za-z0-9_./-]+$", "maxLength": 4096},
            "env": {"type": "object", "propertyNames": {"pattern": "^[A-Z_][A-Z0-9_]*$"},
                    "additionalProperties": {"type": "string"}}
        },
        "properties": {
            "cwd": {"$ref": "#/$defs/path"},
            "argv": {"type": "array", "minItems": 1, "maxItems": 64,
                     "items": {"type": "string", "maxLength": 1024}},
            "env": {"$ref": "#/$defs/env"},
            "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 600, "multipleOf": 0.5},
            "files": {"type": "array", "uniqueItems": true, "items": {"$ref": "#/$defs/path"}},
            "mode": {"oneOf": [{"const": "run"}, {"const": "check"}, {"type": "null"}]}
        },
        "required": ["argv"],
        "additionalProperties": false
    });
    let shell_args = json!({
        "cwd": "src/tools",
        "argv": ["cargo", "test", "--lib", "tools::schema", "--", "--nocapture"],
        "env": {"RUST_LOG": "debug", "CARGO_TERM_COLOR": "never"},
        "timeout_s": 120.5,
        "files": (0..20).map(|i| format!("src/file_{i}.rs")).collect::<Vec<_>>(),
        "mode": "run"
    });
    let batch = json!({
        "type": "object",
        "properties": {"rows": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "id": {"type": "integer", "minimum": 0},
                "price": {"type": "number", "multipleOf": 0.01, "minimum": 0},
                "tag": {"anyOf": [{"type": "string", "maxLength": 8}, {"type": "null"}]}
            },
            "required": ["id", "price"]
        }}}
    });
    let batch_args = json!({"rows": (0..100).map(|i| json!({
        "id": i, "price": (i as f64) * 1.25 + 0.99, "tag": if i % 3 == 0 { Value::Null } else { json!("t") }
    })).collect::<Vec<_>>()});
    vec![
        Workload {
            name: "weather (3 properties), valid",
            schema: weather.clone(),
            args: json!({"city": "Paris", "units": "c", "days": 3}),
        },
        Workload {
            name: "memory (4 properties), valid",
            schema: memory,
            args: json!({"action": "set", "key": "notes/today", "value": "x".repeat(400)}),
        },
        Workload {
            name: "shell-like ($ref, patterns, oneOf, 20 paths), valid",
            schema: shell,
            args: shell_args,
        },
        Workload {
            name: "100 rows (multipleOf 0.01, anyOf), valid",
            schema: batch,
            args: batch_args,
        },
        Workload {
            name: "weather, 3 violations (messages built)",
            schema: weather,
            args: json!({"city": 5, "days": 0, "x": 1}),
        },
    ]
}

fn time(iters: u32, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..iters {
        f();
    }
    start.elapsed().as_nanos() as f64 / f64::from(iters)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(21);
    println!("| workload | old ns/call | new ns/call | new/old |");
    println!("| --- | ---: | ---: | ---: |");
    for w in workloads() {
        let before = old::Schema::compile(w.schema.clone()).expect("old compiles");
        let after = Schema::compile(w.schema.clone()).expect("new compiles");
        let (a, b) = (before.validate(&w.args, "args"), after.validate(&w.args));
        assert_eq!(a.is_ok(), b.is_ok(), "{}: the verdicts differ", w.name);
        // Calibrate to ~20 ms a round on the old validator.
        let once = time(100, || {
            black_box(before.validate(black_box(&w.args), "args").is_ok());
        });
        let iters = ((20e6 / once) as u32).max(10);
        let (mut olds, mut news) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            olds.push(time(iters, || {
                black_box(before.validate(black_box(&w.args), "args").is_ok());
            }));
            news.push(time(iters, || {
                black_box(after.validate(black_box(&w.args)).is_ok());
            }));
        }
        let (o, n) = (median(olds), median(news));
        println!("| {} | {o:.0} | {n:.0} | {:.2} |", w.name, n / o);
    }
}
