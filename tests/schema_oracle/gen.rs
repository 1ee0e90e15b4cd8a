//! Seeded generation of schemas within the supported subset and of instances near their
//! boundaries: numbers at, just past and exact multiples of the bounds and divisors in the
//! schema, strings at the length limits and from each pattern's hard cases (line
//! terminators, non-ASCII digits and spaces, astral characters), objects with and without
//! each named property, arrays around their length limits and with duplicates.
//!
//! Instances follow the schema (through `$ref`, into one option of a combinator) most of the
//! time and are random otherwise, so both verdicts are common.

use serde_json::{json, Map, Value};

/// splitmix64: small, seedable, good enough to spread cases.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }

    pub fn word(&mut self, xs: &[&'static str]) -> &'static str {
        xs[self.below(xs.len())]
    }
}

const NAMES: &[&str] = &["a", "b", "c", "a b", "x/y", "t~1", "x-1", ""];

/// Patterns with strings that sit on their edges.
pub const PATTERNS: &[(&str, &[&str])] = &[
    ("^[a-z]+$", &["abc", "ABC", "abc\n", "", "a1", "é"]),
    (
        r"^\d{3}-\w+$",
        &["123-ab_c", "12-x", "١٢٣-x", "123-", "123-é"],
    ),
    (
        "a.c",
        &["abc", "a\nc", "a\rc", "xa-cx", "a\u{2028}c", "a😀c"],
    ),
    ("^$", &["", "\n", "x"]),
    ("^[^/]*$", &["a/b", "ab", ""]),
    (r"\bcat\b", &["a cat", "concat", "cat", "écat"]),
    ("^(foo|bar)+$", &["foobar", "foo", "baz", "foofoo\n"]),
    (
        r"^[\w.-]+@[^\s@]+$",
        &["a.b@x", "a b@x", "a@b@c", "a@\u{a0}", "a@\u{85}"],
    ),
    ("[0-9]", &["a1", "abc", "٣"]),
    ("^.{2,3}$", &["ab", "abc", "abcd", "a😀", "😀😀", "a\n"]),
    (
        r"^\s*$",
        &[" \t", "\u{a0}", "\u{2003}", "x", "\u{85}", "\u{feff}"],
    ),
    ("é", &["café", "cafe", "cafe\u{301}"]),
    ("^[]a]+$", &["]a", "a", "b"]),
    (r"^\S+$", &["abc", "a b", "a\u{a0}b", "a\u{85}b"]),
];

/// Numbers for bounds and instances, as written in JSON.
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "5",
    "7",
    "10",
    "100",
    "-3",
    "0.1",
    "0.5",
    "2.5",
    "-0.5",
    "0.01",
    "1e-10",
    "1.5",
    "0.3",
    "0.001",
    "0.07",
    "1e20",
    "9007199254740993",
    "1e300",
    "-2.75",
    "1.0",
    "18446744073709551615",
];

/// Divisors for `multipleOf`.
const DIVISORS: &[&str] = &[
    "1", "2", "3", "0.1", "0.5", "0.01", "2.5", "1e-10", "0.07", "7", "1.0", "0.3", "1e-300",
    "1e20",
];

const STRINGS: &[&str] = &[
    "", "a", "ab", "abc", "abcd", "😀", "😀😀", "é", "e\u{301}", "1", " ",
];

fn number(text: &str) -> Value {
    serde_json::from_str(text).expect("pool numbers parse")
}

pub struct Gen {
    pub rng: Rng,
    /// This document is draft 7 (tuples as `items` lists with `additionalItems`, `definitions`,
    /// no `prefixItems` or `dependentRequired`), judged by the oracle's Draft7Validator.
    pub draft7: bool,
    defs: Map<String, Value>,
    vendor: Map<String, Value>,
}

impl Gen {
    pub fn new(seed: u64) -> Gen {
        Gen {
            rng: Rng::new(seed),
            draft7: false,
            defs: Map::new(),
            vendor: Map::new(),
        }
    }

    /// A whole schema document (with the `$defs` its references use).
    pub fn document(&mut self) -> Value {
        self.defs.clear();
        self.vendor.clear();
        self.draft7 = self.rng.chance(0.25);
        let mut root = self.schema(0);
        if !self.defs.is_empty() || !self.vendor.is_empty() {
            let mut obj = match root {
                Value::Object(o) => o,
                other => {
                    let mut o = Map::new();
                    o.insert("allOf".into(), json!([other]));
                    o
                }
            };
            if !self.defs.is_empty() {
                let defs = Value::Object(std::mem::take(&mut self.defs));
                obj.insert(self.defs_keyword().into(), defs);
            }
            if !self.vendor.is_empty() {
                // A place no keyword describes: only a `$ref` makes it a schema.
                obj.insert(
                    "x-vendor".into(),
                    Value::Object(std::mem::take(&mut self.vendor)),
                );
            }
            root = Value::Object(obj);
        }
        root
    }

    fn defs_keyword(&self) -> &'static str {
        if self.draft7 {
            "definitions"
        } else {
            "$defs"
        }
    }

    fn schema(&mut self, depth: usize) -> Value {
        let leaf = depth >= 3;
        let r = self.rng.below(100);
        match r {
            0..=4 => Value::Bool(self.rng.chance(0.7)),
            5..=22 => self.number_schema(),
            23..=37 => self.string_schema(),
            38..=55 if !leaf => self.object_schema(depth),
            56..=68 if !leaf => self.array_schema(depth),
            69..=80 if !leaf => self.combinator(depth),
            81..=87 => self.enum_or_const(),
            88..=95 if !leaf => self.reference(depth),
            _ => {
                // Keywords of two kinds in one schema, with no `type` to tell them apart.
                let mut a = self.number_schema();
                let b = self.string_schema();
                if let (Value::Object(a), Value::Object(b)) = (&mut a, b) {
                    a.remove("type");
                    a.extend(b.into_iter().filter(|(k, _)| k != "type"));
                }
                a
            }
        }
    }

    fn number_schema(&mut self) -> Value {
        let mut m = Map::new();
        match self.rng.below(5) {
            0 => {}
            1 | 2 => {
                m.insert("type".into(), json!("number"));
            }
            3 => {
                m.insert("type".into(), json!("integer"));
            }
            _ => {
                m.insert("type".into(), json!(["integer", "string"]));
            }
        }
        for kw in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] {
            if self.rng.chance(0.3) {
                let n = number(self.rng.word(NUMBERS));
                m.insert(kw.into(), n);
            }
        }
        if self.rng.chance(0.5) {
            let d = number(self.rng.word(DIVISORS));
            m.insert("multipleOf".into(), d);
        }
        Value::Object(m)
    }

    fn string_schema(&mut self) -> Value {
        let mut m = Map::new();
        if self.rng.chance(0.6) {
            m.insert("type".into(), json!("string"));
        }
        if self.rng.chance(0.35) {
            m.insert("minLength".into(), json!(self.rng.below(4)));
        }
        if self.rng.chance(0.35) {
            m.insert("maxLength".into(), json!(self.rng.below(4)));
        }
        if self.rng.chance(0.5) {
            m.insert("pattern".into(), json!(self.rng.pick(PATTERNS).0));
        }
        Value::Object(m)
    }

    fn object_schema(&mut self, depth: usize) -> Value {
        let mut m = Map::new();
        if self.rng.chance(0.7) {
            m.insert("type".into(), json!("object"));
        }
        let mut props = Map::new();
        for _ in 0..self.rng.below(4) {
            let name = self.rng.word(NAMES);
            let s = if self.rng.chance(0.05) {
                json!({"$ref": "#"}) // recursion that moves into the instance
            } else {
                self.schema(depth + 1)
            };
            props.insert(name.into(), s);
        }
        if !props.is_empty() || self.rng.chance(0.3) {
            m.insert("properties".into(), Value::Object(props.clone()));
        }
        if self.rng.chance(0.5) {
            let mut req: Vec<&str> = props
                .keys()
                .map(String::as_str)
                .filter(|_| self.rng.chance(0.6))
                .collect();
            if self.rng.chance(0.2) {
                req.push(self.rng.word(NAMES));
            }
            req.sort_unstable();
            req.dedup();
            m.insert("required".into(), json!(req));
        }
        if self.rng.chance(0.4) {
            let extra = if self.rng.chance(0.5) {
                json!(false)
            } else {
                self.schema(depth + 1)
            };
            m.insert("additionalProperties".into(), extra);
        }
        if self.rng.chance(0.2) {
            let p = self.rng.word(&["^x", "b", "^$", " "]).to_string();
            let s = self.schema(depth + 1);
            m.insert("patternProperties".into(), json!({ p: s }));
        }
        if self.rng.chance(0.15) {
            let names = if self.rng.chance(0.5) {
                json!({"maxLength": 1})
            } else {
                json!({"pattern": self.rng.pick(PATTERNS).0})
            };
            m.insert("propertyNames".into(), names);
        }
        for kw in ["minProperties", "maxProperties"] {
            if self.rng.chance(0.15) {
                m.insert(kw.into(), json!(self.rng.below(3)));
            }
        }
        if !self.draft7 && self.rng.chance(0.1) {
            let a = self.rng.word(NAMES);
            let b = self.rng.word(NAMES);
            m.insert("dependentRequired".into(), json!({ a: [b] }));
        }
        Value::Object(m)
    }

    fn array_schema(&mut self, depth: usize) -> Value {
        let mut m = Map::new();
        if self.rng.chance(0.7) {
            m.insert("type".into(), json!("array"));
        }
        if self.rng.chance(0.3) {
            let n = 1 + self.rng.below(2);
            let prefix: Vec<Value> = (0..n).map(|_| self.schema(depth + 1)).collect();
            if self.draft7 {
                m.insert("items".into(), json!(prefix));
                if self.rng.chance(0.6) {
                    let rest = self.schema(depth + 1);
                    m.insert("additionalItems".into(), rest);
                }
            } else {
                m.insert("prefixItems".into(), json!(prefix));
            }
        }
        if !m.contains_key("items") && self.rng.chance(0.6) {
            let s = if self.rng.chance(0.05) {
                json!({"$ref": "#"})
            } else {
                self.schema(depth + 1)
            };
            m.insert("items".into(), s);
        }
        for kw in ["minItems", "maxItems"] {
            if self.rng.chance(0.2) {
                m.insert(kw.into(), json!(self.rng.below(4)));
            }
        }
        if self.rng.chance(0.25) {
            m.insert("uniqueItems".into(), json!(self.rng.chance(0.8)));
        }
        Value::Object(m)
    }

    fn combinator(&mut self, depth: usize) -> Value {
        match self.rng.below(5) {
            0..=2 => {
                let kw = self.rng.word(&["allOf", "anyOf", "oneOf"]);
                let n = 1 + self.rng.below(3);
                let list: Vec<Value> = (0..n).map(|_| self.schema(depth + 1)).collect();
                json!({ kw: list })
            }
            3 => json!({"not": self.schema(depth + 1)}),
            _ => {
                let mut m = Map::new();
                m.insert("if".into(), self.schema(depth + 1));
                if self.rng.chance(0.7) {
                    m.insert("then".into(), self.schema(depth + 1));
                }
                if self.rng.chance(0.7) {
                    m.insert("else".into(), self.schema(depth + 1));
                }
                Value::Object(m)
            }
        }
    }

    fn enum_or_const(&mut self) -> Value {
        if self.rng.chance(0.5) {
            json!({"const": self.random_value(1)})
        } else {
            let n = 1 + self.rng.below(4);
            let list: Vec<Value> = (0..n).map(|_| self.random_value(1)).collect();
            json!({ "enum": list })
        }
    }

    /// A reference to a schema kept in `$defs`/`definitions` (or in an unknown member), made complete
    /// before anything can refer to it, so references never form a cycle.
    fn reference(&mut self, depth: usize) -> Value {
        if !self.defs.is_empty() && self.rng.chance(0.3) {
            let i = self.rng.below(self.defs.len());
            let name = self.defs.keys().nth(i).cloned().unwrap_or_default();
            return json!({"$ref": format!("#/{}/{name}", self.defs_keyword())});
        }
        let target = self.schema(depth + 1);
        if self.rng.chance(0.3) {
            let name = format!("v{}", self.vendor.len());
            self.vendor.insert(name.clone(), target);
            json!({"$ref": format!("#/x-vendor/{name}")})
        } else {
            let name = format!("d{}", self.defs.len());
            self.defs.insert(name.clone(), target);
            json!({"$ref": format!("#/{}/{name}", self.defs_keyword())})
        }
    }

    pub fn random_value(&mut self, depth: usize) -> Value {
        let max = if depth >= 3 { 4 } else { 6 };
        match self.rng.below(max) {
            0 => self
                .rng
                .pick(&[Value::Null, json!(true), json!(false)])
                .clone(),
            1 | 2 => number(self.rng.word(NUMBERS)),
            3 => json!(self.rng.word(STRINGS)),
            4 => {
                let n = self.rng.below(4);
                Value::Array((0..n).map(|_| self.random_value(depth + 1)).collect())
            }
            _ => {
                let mut m = Map::new();
                for _ in 0..self.rng.below(4) {
                    let k = self.rng.word(NAMES);
                    m.insert(k.into(), self.random_value(depth + 1));
                }
                Value::Object(m)
            }
        }
    }

    /// An instance for `schema` (a part of `root`), near its edges.
    pub fn instance(&mut self, root: &Value, schema: &Value, depth: usize) -> Value {
        if depth > 5 || self.rng.chance(0.15) {
            return self.random_value(depth);
        }
        let Value::Object(s) = schema else {
            return self.random_value(depth);
        };
        if let Some(target) = s
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| root.pointer(&r[1..]))
        {
            if self.rng.chance(0.8) {
                return self.instance(root, target, depth + 1);
            }
        }
        for kw in ["allOf", "anyOf", "oneOf"] {
            if let Some(Value::Array(options)) = s.get(kw) {
                if self.rng.chance(0.6) {
                    let o = self.rng.pick(options).clone();
                    return self.instance(root, &o, depth + 1);
                }
            }
        }
        for kw in ["if", "then", "else", "not"] {
            if let Some(sub) = s.get(kw) {
                if self.rng.chance(0.3) {
                    let sub = sub.clone();
                    return self.instance(root, &sub, depth + 1);
                }
            }
        }
        if let Some(Value::Array(options)) = s.get("enum") {
            if self.rng.chance(0.6) {
                return self.rng.pick(options).clone();
            }
        }
        if let Some(c) = s.get("const") {
            if self.rng.chance(0.6) {
                return c.clone();
            }
        }
        let has = |kws: &[&str]| kws.iter().any(|k| s.contains_key(*k));
        let mut kinds = Vec::new();
        match s.get("type") {
            Some(Value::String(t)) => kinds.push(t.as_str()),
            Some(Value::Array(ts)) => kinds.extend(ts.iter().filter_map(Value::as_str)),
            _ => {
                if has(&[
                    "properties",
                    "required",
                    "additionalProperties",
                    "patternProperties",
                ]) {
                    kinds.push("object");
                }
                if has(&[
                    "items",
                    "prefixItems",
                    "additionalItems",
                    "minItems",
                    "maxItems",
                    "uniqueItems",
                ]) {
                    kinds.push("array");
                }
                if has(&[
                    "minimum",
                    "maximum",
                    "exclusiveMinimum",
                    "exclusiveMaximum",
                    "multipleOf",
                ]) {
                    kinds.push("number");
                }
                if has(&["minLength", "maxLength", "pattern"]) {
                    kinds.push("string");
                }
            }
        }
        if kinds.is_empty() {
            return self.random_value(depth);
        }
        match *self.rng.pick(&kinds) {
            "object" => self.object_near(root, s, depth),
            "array" => self.array_near(root, s, depth),
            "number" | "integer" => self.number_near(s),
            "string" => self.string_near(s),
            _ => self.random_value(depth),
        }
    }

    fn object_near(&mut self, root: &Value, s: &Map<String, Value>, depth: usize) -> Value {
        let mut m = Map::new();
        if let Some(Value::Object(props)) = s.get("properties") {
            for (k, sub) in props {
                if self.rng.chance(0.75) {
                    let v = self.instance(root, sub, depth + 1);
                    m.insert(k.clone(), v);
                }
            }
        }
        if let Some(Value::Object(pp)) = s.get("patternProperties") {
            if self.rng.chance(0.5) {
                let k = self.rng.word(&["x1", "abc", "", " b"]);
                let sub = pp.values().next().cloned().unwrap_or(Value::Bool(true));
                let v = self.instance(root, &sub, depth + 1);
                m.insert(k.into(), v);
            }
        }
        if self.rng.chance(0.3) {
            let k = self.rng.word(NAMES);
            let v = self.random_value(depth + 1);
            m.insert(k.into(), v);
        }
        Value::Object(m)
    }

    fn array_near(&mut self, root: &Value, s: &Map<String, Value>, depth: usize) -> Value {
        let bound = |k: &str| s.get(k).and_then(Value::as_u64).map(|n| n as usize);
        let len = match (bound("minItems"), bound("maxItems")) {
            (Some(n), _) if self.rng.chance(0.4) => (n + self.rng.below(3)).saturating_sub(1),
            (_, Some(n)) if self.rng.chance(0.4) => n + self.rng.below(2),
            _ => self.rng.below(4),
        };
        let (prefix, rest) = match (s.get("prefixItems"), s.get("items")) {
            (Some(Value::Array(p)), rest) => (p.clone(), rest.cloned()),
            (_, Some(Value::Array(p))) => (p.clone(), s.get("additionalItems").cloned()),
            (_, rest) => (Vec::new(), rest.cloned()),
        };
        let rest = rest.unwrap_or(Value::Bool(true));
        let mut out: Vec<Value> = (0..len)
            .map(|i| {
                let sub = prefix.get(i).cloned().unwrap_or_else(|| rest.clone());
                self.instance(root, &sub, depth + 1)
            })
            .collect();
        if !out.is_empty() && self.rng.chance(0.3) {
            // A duplicate, perhaps written differently (1 and 1.0).
            let i = self.rng.below(out.len());
            let dup = match &out[i] {
                Value::Number(n) if n.is_u64() && self.rng.chance(0.5) => number(&format!("{n}.0")),
                v => v.clone(),
            };
            out.push(dup);
        }
        Value::Array(out)
    }

    fn number_near(&mut self, s: &Map<String, Value>) -> Value {
        let hints: Vec<String> = [
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "multipleOf",
        ]
        .iter()
        .filter_map(|k| s.get(*k))
        .map(Value::to_string)
        .collect();
        let base = if hints.is_empty() || self.rng.chance(0.15) {
            self.rng.word(NUMBERS).to_string()
        } else {
            self.rng.pick(&hints).clone()
        };
        let (mant, exp) = decimal(&base);
        let (mant, exp) = match self.rng.below(9) {
            0 => (mant, exp),
            // An exact multiple: of the divisor, if this was one.
            1 | 2 => (mant * [0, 2, 3, 7, -1, 10][self.rng.below(6)], exp),
            // One unit in the last place, or far below it, either way.
            3 => (mant * 10 + 1, exp - 1),
            4 => (mant * 10 - 1, exp - 1),
            5 => (mant * 10_000_000_000 + 1, exp - 10),
            // Plus or minus one.
            6 | 7 => {
                let one = if self.rng.chance(0.5) { 1 } else { -1 };
                if (0..=20).contains(&exp) {
                    (mant * 10i128.pow(exp as u32) + one, 0)
                } else if (-30..0).contains(&exp) {
                    (mant + one * 10i128.pow((-exp) as u32), exp)
                } else {
                    (mant, exp)
                }
            }
            _ => (-mant, exp),
        };
        let text = if exp == 0 && self.rng.chance(0.3) {
            format!("{mant}.0") // an integer written as a float
        } else if (0..19).contains(&exp) {
            (mant * 10i128.pow(exp as u32)).to_string()
        } else {
            format!("{mant}e{exp}")
        };
        serde_json::from_str(&text).unwrap_or_else(|_| json!(0))
    }

    fn string_near(&mut self, s: &Map<String, Value>) -> Value {
        if let Some(p) = s.get("pattern").and_then(Value::as_str) {
            if self.rng.chance(0.7) {
                if let Some((_, samples)) = PATTERNS.iter().find(|(src, _)| *src == p) {
                    return json!(self.rng.word(samples));
                }
            }
        }
        let bound = |k: &str| s.get(k).and_then(Value::as_u64).map(|n| n as usize);
        let len = match (bound("minLength"), bound("maxLength")) {
            (Some(n), _) if self.rng.chance(0.5) => (n + self.rng.below(3)).saturating_sub(1),
            (_, Some(n)) if self.rng.chance(0.5) => n + self.rng.below(2),
            _ => return json!(self.rng.word(STRINGS)),
        };
        let chars = ["a", "é", "😀", "\n", " ", "\u{301}"];
        let text: String = (0..len).map(|_| self.rng.word(&chars)).collect();
        json!(text)
    }
}

/// `text` (a JSON number) as `mantissa × 10^exp`.
fn decimal(text: &str) -> (i128, i32) {
    let v: f64 = text.parse().unwrap_or(0.0);
    if let Ok(i) = text.parse::<i128>() {
        return (i, 0);
    }
    let e = format!("{v:e}");
    let (m, x) = e.split_once('e').unwrap_or((&e, "0"));
    let x: i32 = x.parse().unwrap_or(0);
    let (int, frac) = m.split_once('.').unwrap_or((m, ""));
    let mant: i128 = format!("{int}{frac}").parse().unwrap_or(0);
    (mant, x - frac.len() as i32)
}
