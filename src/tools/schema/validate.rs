//! Checking an instance against a [`Compiled`] schema.
//!
//! One walk serves three uses, told apart by the [`Sink`] it reports to: the full check of a
//! call (violations described, a few kept, the rest counted), a probe (`anyOf`, `not`, `if`:
//! valid or not, stopping at the first problem and formatting nothing) and the first problem
//! of an option (why no `anyOf` option matched). Messages are closures, so a probe never
//! formats one, and the instance path is a stack of borrowed segments rendered as a JSON
//! pointer only when a violation is kept.

use serde_json::{Map, Value};

use super::node::{
    ArrayKeywords, Compiled, Keywords, Node, NodeId, NumberKeywords, ObjectKeywords, StringKeywords,
};
use super::number::Num;
use super::Violation;

/// Checks followed into subschemas before giving up. Reference cycles that never move into
/// the instance are refused at compile time, so this is only reached by very deep instances.
const MAX_DEPTH: usize = 400;

/// Where validation reports; see the module doc.
pub(super) struct Sink {
    /// Stop after this many violations.
    limit: usize,
    /// Keep (and so format) at most this many.
    keep: usize,
    pub(super) out: Vec<Violation>,
    pub(super) count: usize,
}

impl Sink {
    pub(super) fn full(keep: usize, limit: usize) -> Sink {
        Sink {
            limit,
            keep,
            out: Vec::new(),
            count: 0,
        }
    }

    pub(super) fn probe() -> Sink {
        Sink::full(0, 1)
    }

    fn first() -> Sink {
        Sink::full(1, 1)
    }

    fn done(&self) -> bool {
        self.count >= self.limit
    }

    fn report(&mut self, at: &Path<'_>, keyword: &'static str, message: impl FnOnce() -> String) {
        self.count += 1;
        if self.out.len() < self.keep {
            self.out.push(Violation {
                pointer: at.render(),
                keyword,
                message: message(),
            });
        }
    }
}

#[derive(Clone, Copy)]
enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

/// Where in the instance a check is.
#[derive(Default)]
pub(super) struct Path<'a>(Vec<Seg<'a>>);

impl<'a> Path<'a> {
    /// The JSON pointer (RFC 6901): `/items/2`, `/a~1b`; `""` for the instance itself.
    fn render(&self) -> String {
        let mut out = String::new();
        for seg in &self.0 {
            out.push('/');
            match seg {
                Seg::Key(k) => out.push_str(&k.replace('~', "~0").replace('/', "~1")),
                Seg::Index(i) => out.push_str(&i.to_string()),
            }
        }
        out
    }
}

pub(super) struct Validator<'s> {
    pub(super) compiled: &'s Compiled,
}

impl Validator<'_> {
    pub(super) fn check<'a>(
        &self,
        id: NodeId,
        inst: &'a Value,
        path: &mut Path<'a>,
        sink: &mut Sink,
        depth: usize,
    ) {
        if sink.done() {
            return;
        }
        if depth > MAX_DEPTH {
            sink.report(path, "$ref", || {
                "the value is nested too deeply to check".into()
            });
            return;
        }
        let k = match &self.compiled.nodes[id] {
            Node::Any => return,
            Node::Never => {
                sink.report(path, "false", || "no value is allowed here".into());
                return;
            }
            Node::Keywords(k) => k,
        };
        if let Some(target) = k.reference {
            self.check(target, inst, path, sink, depth + 1);
        }
        if let Some(types) = k.types {
            if !types.matches(inst) {
                sink.report(path, "type", || {
                    format!("expected {}, got {}", types.describe(), describe(inst))
                });
                // Every other keyword would only restate the type mismatch.
                return;
            }
        }
        if let Some(options) = &k.enumeration {
            if !options.iter().any(|o| json_eq(o, inst)) {
                sink.report(path, "enum", || {
                    let shown: Vec<String> =
                        options.iter().take(20).map(Value::to_string).collect();
                    let more = if options.len() > 20 { ", …" } else { "" };
                    format!(
                        "must be one of {}{more}; got {}",
                        shown.join(", "),
                        describe(inst)
                    )
                });
            }
        }
        if let Some(c) = &k.constant {
            if !json_eq(c, inst) {
                sink.report(path, "const", || {
                    format!("must be exactly {c}; got {}", describe(inst))
                });
            }
        }
        match inst {
            Value::Object(map) => {
                if let Some(o) = &k.object {
                    self.check_object(o, map, path, sink, depth);
                }
            }
            Value::Array(items) => {
                if let Some(a) = &k.array {
                    self.check_array(a, items, path, sink, depth);
                }
            }
            Value::String(s) => {
                if let Some(s_kw) = &k.string {
                    check_string(s_kw, s, path, sink);
                }
            }
            Value::Number(n) => {
                if let Some(n_kw) = &k.number {
                    check_number(n_kw, Num::of(n), inst, path, sink);
                }
            }
            _ => {}
        }
        self.check_combinators(k, inst, path, sink, depth);
    }

    fn valid<'a>(&self, id: NodeId, inst: &'a Value, path: &mut Path<'a>, depth: usize) -> bool {
        let mut probe = Sink::probe();
        self.check(id, inst, path, &mut probe, depth + 1);
        probe.count == 0
    }

    fn check_object<'a>(
        &self,
        o: &ObjectKeywords,
        map: &'a Map<String, Value>,
        path: &mut Path<'a>,
        sink: &mut Sink,
        depth: usize,
    ) {
        if !o.required.is_empty() {
            let mut missing = o
                .required
                .iter()
                .filter(|n| !map.contains_key(*n))
                .peekable();
            if missing.peek().is_some() {
                sink.report(path, "required", || {
                    let names: Vec<String> = missing.map(|n| format!("{n:?}")).collect();
                    match names.as_slice() {
                        [one] => format!("missing required property {one}"),
                        many => format!("missing required properties {}", many.join(", ")),
                    }
                });
            }
        }
        for (name, needs) in &o.dependent_required {
            if !map.contains_key(name) {
                continue;
            }
            for need in needs.iter().filter(|n| !map.contains_key(*n)) {
                sink.report(path, "dependentRequired", || {
                    format!("property {need:?} is required when {name:?} is present")
                });
            }
        }
        if let Some(n) = o.min_properties.filter(|&n| map.len() < n) {
            sink.report(path, "minProperties", || {
                format!("must have at least {n} properties; has {}", map.len())
            });
        }
        if let Some(n) = o.max_properties.filter(|&n| map.len() > n) {
            sink.report(path, "maxProperties", || {
                format!("must have at most {n} properties; has {}", map.len())
            });
        }
        for (key, value) in map {
            if sink.done() {
                return;
            }
            if let Some(names) = o.property_names {
                let name = Value::String(key.clone());
                let mut first = Sink::first();
                self.check(names, &name, &mut Path::default(), &mut first, depth + 1);
                if first.count > 0 {
                    sink.report(path, "propertyNames", || match first.out.pop() {
                        Some(v) => format!("property name {key:?}: {} ({})", v.message, v.keyword),
                        None => format!("property name {key:?} is not allowed"),
                    });
                }
            }
            path.0.push(Seg::Key(key));
            let mut matched = false;
            if let Ok(i) = o
                .properties
                .binary_search_by(|(name, _)| name.as_str().cmp(key))
            {
                matched = true;
                self.check(o.properties[i].1, value, path, sink, depth + 1);
            }
            for (pattern, _, id) in &o.pattern_properties {
                if pattern.is_match(key) {
                    matched = true;
                    self.check(*id, value, path, sink, depth + 1);
                }
            }
            path.0.pop();
            match o.additional {
                Some(_) if matched => {}
                Some(_) if o.additional_false => sink.report(path, "additionalProperties", || {
                    let allowed: Vec<String> =
                        o.properties.iter().map(|(k, _)| format!("{k:?}")).collect();
                    if allowed.is_empty() {
                        format!("unexpected property {key:?}")
                    } else {
                        format!(
                            "unexpected property {key:?} (allowed: {})",
                            allowed.join(", ")
                        )
                    }
                }),
                Some(id) => {
                    path.0.push(Seg::Key(key));
                    self.check(id, value, path, sink, depth + 1);
                    path.0.pop();
                }
                None => {}
            }
        }
    }

    fn check_array<'a>(
        &self,
        a: &ArrayKeywords,
        items: &'a [Value],
        path: &mut Path<'a>,
        sink: &mut Sink,
        depth: usize,
    ) {
        if let Some(n) = a.min_items.filter(|&n| items.len() < n) {
            sink.report(path, "minItems", || {
                format!("must have at least {n} items; has {}", items.len())
            });
        }
        if let Some(n) = a.max_items.filter(|&n| items.len() > n) {
            sink.report(path, "maxItems", || {
                format!("must have at most {n} items; has {}", items.len())
            });
        }
        if a.unique {
            'outer: for i in 0..items.len() {
                for j in i + 1..items.len() {
                    if json_eq(&items[i], &items[j]) {
                        sink.report(path, "uniqueItems", || {
                            format!("items must be unique, but items {i} and {j} are equal")
                        });
                        break 'outer;
                    }
                }
            }
        }
        for (i, item) in items.iter().enumerate() {
            if sink.done() {
                return;
            }
            let id = match a.prefix.get(i) {
                Some(&id) => id,
                None => match a.rest {
                    Some(id) if matches!(self.compiled.nodes[id], Node::Never) => {
                        sink.report(path, a.rest_keyword, || {
                            format!(
                                "must have at most {} items; has {}",
                                a.prefix.len(),
                                items.len()
                            )
                        });
                        return;
                    }
                    Some(id) => id,
                    None => return,
                },
            };
            path.0.push(Seg::Index(i));
            self.check(id, item, path, sink, depth + 1);
            path.0.pop();
        }
    }

    fn check_combinators<'a>(
        &self,
        k: &Keywords,
        inst: &'a Value,
        path: &mut Path<'a>,
        sink: &mut Sink,
        depth: usize,
    ) {
        for &id in &k.all_of {
            self.check(id, inst, path, sink, depth + 1);
        }
        for (keyword, options) in [("anyOf", &k.any_of), ("oneOf", &k.one_of)] {
            if options.is_empty() || sink.done() {
                continue;
            }
            let mut matching = Vec::new();
            for (i, &id) in options.iter().enumerate() {
                if self.valid(id, inst, path, depth) {
                    matching.push(i + 1);
                    if keyword == "anyOf" || matching.len() > 1 {
                        break;
                    }
                }
            }
            if matching.is_empty() {
                sink.report(path, keyword, || {
                    let here = path.render();
                    let why: Vec<String> = options
                        .iter()
                        .enumerate()
                        .map(|(i, &id)| {
                            let mut first = Sink::first();
                            let mut p = Path(path.0.clone());
                            self.check(id, inst, &mut p, &mut first, depth + 1);
                            let v = first.out.pop().unwrap_or(Violation {
                                pointer: here.clone(),
                                keyword,
                                message: "does not match".into(),
                            });
                            let at = if v.pointer == here {
                                String::new()
                            } else {
                                format!("{}: ", v.pointer)
                            };
                            format!("option {}: {at}{} ({})", i + 1, v.message, v.keyword)
                        })
                        .collect();
                    format!(
                        "does not match any of the {} allowed forms: {}",
                        options.len(),
                        why.join(" | ")
                    )
                });
            } else if keyword == "oneOf" && matching.len() > 1 {
                sink.report(path, keyword, || {
                    format!(
                        "matches more than one of the forms (options {} and {}), but must \
                         match exactly one",
                        matching[0], matching[1]
                    )
                });
            }
        }
        if let Some(not) = k.not {
            if self.valid(not, inst, path, depth) {
                sink.report(path, "not", || "matches a schema it must not match".into());
            }
        }
        if let Some((cond, then, otherwise)) = k.condition {
            let branch = if self.valid(cond, inst, path, depth) {
                then
            } else {
                otherwise
            };
            if let Some(id) = branch {
                self.check(id, inst, path, sink, depth + 1);
            }
        }
    }
}

fn check_string(k: &StringKeywords, s: &str, path: &Path<'_>, sink: &mut Sink) {
    if k.min_length.is_some() || k.max_length.is_some() {
        let len = s.chars().count();
        if let Some(n) = k.min_length.filter(|&n| len < n) {
            sink.report(path, "minLength", || {
                format!("must be at least {n} characters long; is {len}")
            });
        }
        if let Some(n) = k.max_length.filter(|&n| len > n) {
            sink.report(path, "maxLength", || {
                format!("must be at most {n} characters long; is {len}")
            });
        }
    }
    if let Some((pattern, src)) = &k.pattern {
        if !pattern.is_match(s) {
            sink.report(path, "pattern", || {
                format!("{} does not match the pattern {src:?}", describe_str(s))
            });
        }
    }
}

fn check_number(k: &NumberKeywords, x: Num, inst: &Value, path: &Path<'_>, sink: &mut Sink) {
    for b in &k.minimum {
        let ord = x.cmp(b.value);
        let fails = if b.exclusive {
            !ord.is_some_and(|o| o.is_gt())
        } else {
            !ord.is_some_and(|o| o.is_ge())
        };
        if fails {
            sink.report(path, b.keyword, || {
                let how = if b.exclusive {
                    "greater than"
                } else {
                    "at least"
                };
                format!("must be {how} {}; got {inst}", b.text)
            });
        }
    }
    for b in &k.maximum {
        let ord = x.cmp(b.value);
        let fails = if b.exclusive {
            !ord.is_some_and(|o| o.is_lt())
        } else {
            !ord.is_some_and(|o| o.is_le())
        };
        if fails {
            sink.report(path, b.keyword, || {
                let how = if b.exclusive { "less than" } else { "at most" };
                format!("must be {how} {}; got {inst}", b.text)
            });
        }
    }
    if let Some((divisor, text)) = &k.multiple_of {
        if !x.is_multiple_of(divisor) {
            sink.report(path, "multipleOf", || {
                format!("{inst} is not a multiple of {text}")
            });
        }
    }
}

/// JSON equality where `1` and `1.0` are the same number (compared exactly).
pub(super) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => Num::of(x).eq(Num::of(y)),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// A short description of a value for messages: `number 42`, `string "abc"`, `an object`.
fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => format!("string {}", describe_str(s)),
        Value::Array(a) => format!("an array of {} items", a.len()),
        Value::Object(_) => "an object".into(),
    }
}

fn describe_str(s: &str) -> String {
    const MAX: usize = 60;
    if s.chars().count() <= MAX {
        format!("{s:?}")
    } else {
        let cut: String = s.chars().take(MAX).collect();
        format!("{cut:?}… ({} characters)", s.chars().count())
    }
}
