//! The floors stay true: every `use crate::…` / `super::…` (and every `crate::…` path) of
//! non-test code under `src/` points down the layer order written in `src/lib.rs`, and no
//! import closes a circle, between files or between top-level modules.
//!
//! The layer order is read from `src/lib.rs` (the ```` ```text ```` block after "Layers"),
//! so it is written once. The binary (`main.rs`, `commands/`) is the top floor and reaches
//! the library as `callbackd::`: its files close no circle either, and it opens no database
//! itself (no `rusqlite`, no `tokio_postgres`): the store is the one SQL layer.
//!
//! Files are read as text, with comments, string and char literals blanked out first
//! ([`strip_literals`]), so a `"text/*"` or a `"{"` inside a literal hides nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Module = Vec<String>;

/// Every `.rs` file under `src`.
fn rust_files(src: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out
}

/// Reads the source files of one crate under `src`: the library's (`binary` false: all but
/// `main.rs`, `commands/`, `bin/`) or the binary's (`main.rs`, its root, and `commands/`).
/// Module path -> text.
fn read_crate(src: &Path, binary: bool) -> BTreeMap<Module, String> {
    let mut out = BTreeMap::new();
    for path in rust_files(src) {
        let rel = path.strip_prefix(src).unwrap().with_extension("");
        let mut module: Module = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if module.last().is_some_and(|l| l == "mod") {
            module.pop();
        }
        let keep = match module.first().map(String::as_str) {
            Some("bin") => false,
            Some("main" | "commands") => binary,
            _ => !binary,
        };
        if !keep {
            continue;
        }
        if module.len() == 1 && (module[0] == "lib" || module[0] == "main") {
            module.clear();
        }
        out.insert(module, std::fs::read_to_string(&path).unwrap());
    }
    out
}

/// Reads every library source file: module path -> text.
fn read_sources(src: &Path) -> BTreeMap<Module, String> {
    read_crate(src, false)
}

/// The text without comments, with every string and char literal emptied (`""`, `' '`),
/// so that nothing inside a literal (a `"text/*"`, a `"{"`, a `"use crate::x;"`) reads as
/// code. Handles escapes, raw strings (`r"…"`, `r#"…"#`), byte and C strings (`b"…"`,
/// `br#"…"#`, `c"…"`), char literals (`'"'`, `'\''`, `'{'`) and lifetimes (`'a`, which are
/// not chars), and nested block comments.
fn strip_literals(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let at = |k: usize| c.get(k).copied();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < c.len() {
        match (c[i], at(i + 1)) {
            ('/', Some('/')) => {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
            }
            ('/', Some('*')) => {
                let mut depth = 0;
                while i < c.len() {
                    match (c[i], at(i + 1)) {
                        ('/', Some('*')) => (depth, i) = (depth + 1, i + 2),
                        ('*', Some('/')) => {
                            (depth, i) = (depth - 1, i + 2);
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => i += 1,
                    }
                }
                out.push(' ');
            }
            ('r', Some('"' | '#')) if raw_string_at(&c, i) => {
                let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
                i += 1 + hashes + 1;
                while i < c.len() {
                    let closes = c.get(i + 1..i + 1 + hashes);
                    if c[i] == '"' && closes.is_some_and(|h| h.iter().all(|&h| h == '#')) {
                        i += 1 + hashes;
                        break;
                    }
                    i += 1;
                }
                out.push_str("\"\"");
            }
            ('"', _) => {
                i += 1;
                while i < c.len() && c[i] != '"' {
                    i += if c[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            }
            ('\'', Some(next)) => {
                // A char literal (`'x'`, `'\n'`, `'\u{7f}'`), or a lifetime or label (`'a`).
                let end = if next == '\\' {
                    (i + 3..c.len()).find(|&k| c[k] == '\'')
                } else {
                    Some(i + 2).filter(|&k| at(k) == Some('\''))
                };
                match end {
                    Some(end) => {
                        out.push_str("' '");
                        i = end + 1;
                    }
                    None => {
                        out.push('\'');
                        i += 1;
                    }
                }
            }
            (ch, _) => {
                out.push(ch);
                i += 1;
            }
        }
    }
    out
}

/// Whether the `r` at `i` opens a raw string (`r"`, `r#"`, `br"`, `cr#"`), not a raw
/// identifier (`r#type`) or the end of a name.
fn raw_string_at(c: &[char], i: usize) -> bool {
    let before = |k: usize| k.checked_sub(1).map(|k| c[k]);
    let starts_token = match before(i) {
        Some('b' | 'c') => !before(i - 1).is_some_and(is_ident),
        Some(p) => !is_ident(p),
        None => true,
    };
    let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
    starts_token && c.get(i + 1 + hashes) == Some(&'"')
}

/// The text without comments, literals' contents and `#[cfg(test)]` items.
fn strip(text: &str) -> String {
    let text = strip_literals(text);
    let mut out = String::new();
    let mut i = 0;
    while let Some(found) = text[i..].find("#[cfg(test)]") {
        let at = i + found;
        out.push_str(&text[i..at]);
        let after = at + "#[cfg(test)]".len();
        let brace = text[after..].find('{').map(|b| after + b);
        let semi = text[after..].find(';').map(|s| after + s);
        match (brace, semi) {
            (b, Some(s)) if b.is_none_or(|b| s < b) => i = s + 1,
            (Some(b), _) => {
                let mut depth = 0;
                let mut end = text.len();
                for (k, c) in text[b..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = b + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                i = end;
            }
            _ => i = text.len(),
        }
    }
    out.push_str(&text[i..]);
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Expands a use tree (`crate::{a::b, c::{d, e}}`) into its paths.
fn expand(prefix: &str, tree: &str) -> Vec<String> {
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree);
        return vec![format!("{prefix}{path}")];
    };
    let head = &tree[..open];
    let body = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (k, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&body[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&body[start..]);
    let mut out = Vec::new();
    for part in parts.into_iter().map(str::trim).filter(|p| !p.is_empty()) {
        if part == "self" {
            out.push(format!("{prefix}{}", head.trim_end_matches(':')));
        } else {
            out.extend(expand(&format!("{prefix}{head}"), part));
        }
    }
    out
}

/// Every `crate::`/`super::`/`self::` path a file names: in `use` trees and in code.
fn paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes: Vec<char> = text.chars().collect();
    let s: String = bytes.iter().collect();
    // `use` trees.
    let mut i = 0;
    while let Some(found) = s[i..].find("use ") {
        let at = i + found;
        i = at + 4;
        if s[..at].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        let Some(end) = s[i..].find(';') else { break };
        let tree: String = s[i..i + end]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        if ["crate::", "super::", "self::"]
            .iter()
            .any(|p| tree.starts_with(p))
        {
            out.extend(expand("", &tree));
        }
    }
    // Paths in code: `crate::a::b`, `super::x`.
    for root in ["crate::", "super::"] {
        let mut i = 0;
        while let Some(found) = s[i..].find(root) {
            let at = i + found;
            i = at + root.len();
            if s[..at].chars().next_back().is_some_and(is_ident) {
                continue;
            }
            let end = s[at..]
                .char_indices()
                .find(|&(_, c)| !(is_ident(c) || c == ':'))
                .map_or(s.len(), |(k, _)| at + k);
            out.push(s[at..end].trim_end_matches(':').to_string());
        }
    }
    out
}

/// The module a path names: its longest prefix that is a module.
fn resolve(current: &Module, path: &str, modules: &BTreeSet<Module>) -> Option<Module> {
    let segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let (mut full, rest): (Module, &[&str]) = match segs.first() {
        Some(&"crate") => (Vec::new(), &segs[1..]),
        Some(&("super" | "self")) => {
            let mut base = current.clone();
            let mut k = 0;
            while k < segs.len() && (segs[k] == "super" || segs[k] == "self") {
                if segs[k] == "super" {
                    base.pop();
                }
                k += 1;
            }
            (base, &segs[k..])
        }
        _ => return None,
    };
    full.extend(rest.iter().map(|s| s.to_string()));
    (1..=full.len())
        .rev()
        .map(|n| full[..n].to_vec())
        .find(|m| modules.contains(m))
}

/// Each file's imports of other files (not its own children, not the crate root).
fn edges(sources: &BTreeMap<Module, String>) -> BTreeMap<Module, BTreeSet<Module>> {
    let modules: BTreeSet<Module> = sources.keys().cloned().collect();
    let mut out = BTreeMap::new();
    for (module, text) in sources {
        let targets = paths(&strip(text))
            .iter()
            .filter_map(|p| resolve(module, p, &modules))
            .filter(|t| t != module && !t.is_empty())
            .filter(|t| module.is_empty() || !t.starts_with(module))
            .collect();
        out.insert(module.clone(), targets);
    }
    out
}

/// The strongly connected components with more than one node (Tarjan).
fn circles<N: Ord + Clone>(graph: &BTreeMap<N, BTreeSet<N>>) -> Vec<Vec<N>> {
    struct Walk<'g, N> {
        graph: &'g BTreeMap<N, BTreeSet<N>>,
        index: BTreeMap<N, usize>,
        low: BTreeMap<N, usize>,
        stack: Vec<N>,
        on: BTreeSet<N>,
        out: Vec<Vec<N>>,
    }
    impl<N: Ord + Clone> Walk<'_, N> {
        fn visit(&mut self, v: &N) {
            let n = self.index.len();
            self.index.insert(v.clone(), n);
            self.low.insert(v.clone(), n);
            self.stack.push(v.clone());
            self.on.insert(v.clone());
            let next: Vec<N> = self.graph.get(v).into_iter().flatten().cloned().collect();
            for w in next {
                if !self.index.contains_key(&w) {
                    self.visit(&w);
                    let low = self.low[v].min(self.low[&w]);
                    self.low.insert(v.clone(), low);
                } else if self.on.contains(&w) {
                    let low = self.low[v].min(self.index[&w]);
                    self.low.insert(v.clone(), low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(&w);
                    let done = &w == v;
                    component.push(w);
                    if done {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.out.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.out
}

/// The layer order of `src/lib.rs`: each top-level module's floor, 0 at the top.
fn floors(lib: &str) -> BTreeMap<String, usize> {
    let docs: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(str::trim)
        .collect();
    let start = docs
        .iter()
        .position(|l| l.contains("Layers"))
        .expect("src/lib.rs documents the layers");
    let open = start
        + docs[start..]
            .iter()
            .position(|l| l.starts_with("```"))
            .expect("the layers are in a code block");
    let mut out = BTreeMap::new();
    for (floor, line) in docs[open + 1..]
        .iter()
        .take_while(|l| !l.starts_with("```"))
        .enumerate()
    {
        // Words in parentheses are remarks, not modules.
        let mut depth = 0;
        let words: String = line
            .chars()
            .map(|c| {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                if depth > 0 || c == ')' {
                    ' '
                } else {
                    c
                }
            })
            .collect();
        for module in words.split_whitespace() {
            let module = module.trim_end_matches('/');
            assert!(
                out.insert(module.to_string(), floor).is_none(),
                "{module} is on two floors in src/lib.rs"
            );
        }
    }
    out
}

/// What is wrong with `sources` against `floors`, one line each.
fn problems(sources: &BTreeMap<Module, String>, floors: &BTreeMap<String, usize>) -> Vec<String> {
    let edges = edges(sources);
    let mut out = Vec::new();
    let name = |m: &Module| {
        if m.is_empty() {
            "lib".to_string()
        } else {
            m.join("/")
        }
    };
    for module in sources.keys().filter(|m| !m.is_empty()) {
        if !floors.contains_key(&module[0]) {
            out.push(format!(
                "module {} is on no floor of the layer order in src/lib.rs",
                module[0]
            ));
        }
    }
    let mut top: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, targets) in &edges {
        let Some(a) = from.first() else { continue };
        for to in targets {
            let b = &to[0];
            if a == b {
                continue;
            }
            top.entry(a.clone()).or_default().insert(b.clone());
            if let (Some(fa), Some(fb)) = (floors.get(a), floors.get(b)) {
                if fb < fa {
                    out.push(format!(
                        "{} imports {}, which is above it in the layer order",
                        name(from),
                        name(to)
                    ));
                }
            }
        }
    }
    for c in circles(&edges) {
        let files: Vec<String> = c.iter().map(name).collect();
        out.push(format!("file circle: {}", files.join(", ")));
    }
    for c in circles(&top) {
        out.push(format!("module circle: {}", c.join(", ")));
    }
    out.sort();
    out.dedup();
    out
}

/// The crates of the database drivers, which only the store may name.
const DATABASE_CRATES: [&str; 2] = ["rusqlite", "tokio_postgres"];

/// Whether `text` names `word` as a whole identifier.
fn names(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        !text[..at].chars().next_back().is_some_and(is_ident)
            && !text[at + word.len()..].chars().next().is_some_and(is_ident)
    })
}

/// What is wrong with the binary's files, one line each: a file circle, or a database
/// driver named outside the library.
fn binary_problems(sources: &BTreeMap<Module, String>) -> Vec<String> {
    let name = |m: &Module| {
        if m.is_empty() {
            "main".to_string()
        } else {
            m.join("/")
        }
    };
    let mut out = Vec::new();
    for (module, text) in sources {
        let text = strip(text);
        for krate in DATABASE_CRATES.iter().filter(|k| names(&text, k)) {
            out.push(format!(
                "{} uses {krate} directly: the binary reaches the database through the \
                 library (`callbackd::store`)",
                name(module)
            ));
        }
    }
    for c in circles(&edges(sources)) {
        let files: Vec<String> = c.iter().map(name).collect();
        out.push(format!("file circle: {}", files.join(", ")));
    }
    out.sort();
    out
}

#[test]
fn every_import_points_down_the_layer_order_and_none_closes_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let floors = floors(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    let problems = problems(&read_sources(&src), &floors);
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn the_binary_closes_no_circle_and_opens_no_database_itself() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let binary = read_crate(&src, true);
    assert!(binary.contains_key(&Vec::new()) && binary.keys().any(|m| m[..] == ["commands"]));
    let problems = binary_problems(&binary);
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// Every file under `src/` (the binary's too) stays readable in one sitting: at most 600
/// lines, and the config leaf's files under 250 (one `[section]` a file), so a newcomer
/// finds a key next to its checks. A file that grows past the line is split by concept.
#[test]
fn no_source_file_is_over_600_lines_and_no_config_file_over_250() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut too_long = Vec::new();
    for path in rust_files(&src) {
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        let rel = path.strip_prefix(&src).unwrap();
        let limit = if rel.starts_with("config") { 250 } else { 600 };
        if lines > limit {
            too_long.push(format!(
                "src/{} has {lines} lines (at most {limit})",
                rel.display()
            ));
        }
    }
    too_long.sort();
    assert!(
        too_long.is_empty(),
        "split by concept:\n{}",
        too_long.join("\n")
    );
}

#[test]
fn the_check_finds_an_upward_import_a_circle_and_a_module_off_the_floors() {
    let lib = "//! Layers:\n//!\n//! ```text\n//! app (top)\n//! store  config/\n//! ```\n";
    let floors = floors(lib);
    assert_eq!(floors["app"], 0);
    assert_eq!(floors["config"], 1);
    let source = |m: &str, text: &str| {
        (
            m.split('/').map(str::to_string).collect::<Module>(),
            text.to_string(),
        )
    };
    let sources: BTreeMap<Module, String> = [
        source("app", "use crate::store::Store;\n"),
        // Up: store is below app.
        source("store", "use crate::{app::App, config};\n"),
        // Back down again: a circle of files (and of modules).
        source("config", "fn f() { crate::store::x(); }\n"),
        // Test code and comments do not count.
        source(
            "store/a",
            "// use crate::app;\n#[cfg(test)]\nmod tests { use crate::app; }\nuse super::b;\n",
        ),
        source("store/b", "pub fn b() {}\n"),
        source("extra", "use crate::store;\n"),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        problems(&sources, &floors),
        [
            "file circle: app, config, store",
            "module circle: app, config, store",
            "module extra is on no floor of the layer order in src/lib.rs",
            "store imports app, which is above it in the layer order",
        ]
    );
}

/// The imports `strip` leaves to be seen in `text`, as the check reads them.
fn seen(text: &str) -> Vec<String> {
    paths(&strip(text))
}

#[test]
fn a_block_comment_opener_in_a_string_hides_no_import() {
    let text = "const ACCEPT: &str = \"text/*\";\nuse crate::store::Store;\n";
    assert_eq!(seen(text), ["crate::store::Store", "crate::store::Store"]);
    let text = "const URL: &str = \"http://x\";\nuse crate::store;\n";
    assert_eq!(seen(text), ["crate::store", "crate::store"]);
}

#[test]
fn a_brace_in_a_string_does_not_end_or_extend_a_test_item() {
    // A `"}"` inside the test module would end it early, a `"{"` would swallow what follows.
    let text =
        "#[cfg(test)]\nmod tests { const A: &str = \"}\"; use crate::app; }\nuse crate::store;\n";
    assert_eq!(seen(text), ["crate::store", "crate::store"]);
    let text = "#[cfg(test)]\nmod tests { const A: &str = \"{\"; }\nuse crate::store;\n";
    assert_eq!(seen(text), ["crate::store", "crate::store"]);
}

#[test]
fn code_inside_a_string_is_not_an_import() {
    assert!(seen("const S: &str = \"use crate::app;\";\n").is_empty());
    assert!(seen("fn f() { g(\"crate::app::x\") }\n").is_empty());
}

#[test]
fn the_stripper_empties_every_kind_of_literal() {
    let cases = [
        // Escaped quotes and backslashes stay inside their string.
        (r#"a("x\"/*", "y\\") b"#, r#"a("", "") b"#),
        // Raw strings, with and without hashes; a quote inside r#"…"# does not end it.
        (r#"a(r"c:\dir\") b"#, r#"a("") b"#),
        (r##"a(r#"say "{" /* "#) b"##, r#"a("") b"#),
        // Byte strings and raw byte strings, C strings.
        (
            r##"a(b"\"{", br"x\", br#"" }"#, c"/*") b"##,
            r#"a(b"", b"", b"", c"") b"#,
        ),
        // Char literals: a quote, a brace, an escaped quote, an escaped backslash, unicode.
        (
            r#"a('"', '{', '\'', '\\', '\u{7b}', b'}') b"#,
            "a(' ', ' ', ' ', ' ', ' ', b' ') b",
        ),
        // Lifetimes and labels are not chars: nothing after them is swallowed.
        (
            "fn f<'a>(x: &'a str) -> &'static str { 'outer: loop { break 'outer; } }",
            "fn f<'a>(x: &'a str) -> &'static str { 'outer: loop { break 'outer; } }",
        ),
        // A raw identifier is no raw string.
        ("let r#type = r#match; \"s\"", "let r#type = r#match; \"\""),
        // Comments, nested block comments, and a quote in a comment.
        ("a /* x /* \" */ y */ b // \"\nc", "a   b \nc"),
    ];
    for (text, want) in cases {
        assert_eq!(strip_literals(text), want, "stripping {text:?}");
    }
}

#[test]
fn the_binary_check_finds_a_database_driver_and_a_circle() {
    let source = |m: &str, text: &str| {
        (
            m.split('/')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect::<Module>(),
            text.to_string(),
        )
    };
    let binary: BTreeMap<Module, String> = [
        source("", "mod commands;\nfn main() { commands::run() }\n"),
        source("commands", "pub fn run() {}\n"),
        source(
            "commands/prune",
            "use rusqlite::Connection;\nuse super::status::x;\n",
        ),
        source("commands/status", "use super::prune::y;\n"),
        // Named in a string or a comment, or as part of another name, it is not a use.
        source(
            "commands/check",
            "// tokio_postgres\nconst S: &str = \"rusqlite::Connection\";\nfn my_rusqlite_count() {}\n",
        ),
        source("commands/copy", "fn f() { tokio_postgres::connect(); }\n"),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        binary_problems(&binary),
        [
            "commands/copy uses tokio_postgres directly: the binary reaches the database \
             through the library (`callbackd::store`)",
            "commands/prune uses rusqlite directly: the binary reaches the database through \
             the library (`callbackd::store`)",
            "file circle: commands/prune, commands/status",
        ]
    );
}
