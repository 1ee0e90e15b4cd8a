// The pattern wrapper of commit 85115d4 (src/tools/pattern.rs) that old.rs uses, kept as
// the baseline of the schema micro-benchmark.

//! `pattern` / `patternProperties` regular expressions.
//!
//! JSON Schema patterns are ECMA-262 regular expressions, matched anywhere in the string.
//! They are compiled with `regex-automata`'s DFA, which the daemon already builds for its log
//! filter (so `pattern` costs no new dependency). What that means for schema authors:
//! - `\d`, `\w`, `\s` (and `\D`, `\W`, `\S` outside brackets) are ASCII classes, as in
//!   ECMA-262 (rewritten here into explicit classes); `\b` is an ASCII word boundary;
//! - no backreferences, lookaround or Unicode case folding (`(?i)` on non-ASCII letters):
//!   such a pattern fails when the tool is registered, naming the pattern;
//! - patterns are compiled once, at registration, with a size bound.

use regex_automata::dfa::{dense, regex::Regex};
use regex_automata::util::syntax;

/// A compiled pattern.
#[derive(Clone, Debug)]
pub struct Pattern {
    regex: Regex,
}

/// Bound on a compiled pattern's automaton: tool schemas have small patterns; one that
/// needs more is refused at startup rather than slowing every call.
const MAX_DFA_BYTES: usize = 2 << 20;

const DIGIT: &str = "0-9";
const WORD: &str = "0-9A-Za-z_";
const SPACE: &str = r"\t\n\x0B\x0C\r\x20\xA0\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}";

impl Pattern {
    pub fn new(src: &str) -> Result<Pattern, String> {
        let translated = translate(src)?;
        let regex = Regex::builder()
            .syntax(syntax::Config::new().unicode(true).utf8(true))
            .dense(
                dense::Config::new()
                    .dfa_size_limit(Some(MAX_DFA_BYTES))
                    .determinize_size_limit(Some(MAX_DFA_BYTES)),
            )
            .build(&translated)
            .map_err(|e| e.to_string())?;
        Ok(Pattern { regex })
    }

    /// Whether the pattern matches somewhere in `s` (JSON Schema patterns are unanchored).
    pub fn is_match(&self, s: &str) -> bool {
        self.regex.is_match(s)
    }
}

/// Rewrites the ECMA-262 class escapes into explicit ASCII classes.
fn translate(src: &str) -> Result<String, String> {
    let mut out = String::with_capacity(src.len() + 16);
    let mut in_class = false;
    let mut chars = src.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(e) = chars.next() else {
                    return Err("the pattern ends with a lone backslash".into());
                };
                let class = match e {
                    'd' | 'D' => Some(DIGIT),
                    'w' | 'W' => Some(WORD),
                    's' | 'S' => Some(SPACE),
                    _ => None,
                };
                match (class, in_class) {
                    (Some(set), false) => {
                        let neg = if e.is_ascii_uppercase() { "^" } else { "" };
                        out.push_str(&format!("[{neg}{set}]"));
                    }
                    (Some(_), true) if e.is_ascii_uppercase() => {
                        return Err(format!("\\{e} inside brackets is not supported"));
                    }
                    (Some(set), true) => out.push_str(set),
                    (None, false) if e == 'b' || e == 'B' => {
                        out.push_str(&format!("(?-u:\\{e})"));
                    }
                    (None, true) if e == 'b' => out.push_str(r"\x08"),
                    (None, _) if e.is_ascii_digit() && e != '0' => {
                        return Err("backreferences are not supported".into());
                    }
                    (None, _) => {
                        out.push('\\');
                        out.push(e);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push(c);
                // A `]` or `^]` right after the opening bracket is a literal in ECMA and in
                // regex-syntax alike; copy it so it does not close the class.
                let rest = chars.as_str();
                if let Some(r) = rest.strip_prefix("^]") {
                    out.push_str("^]");
                    chars = r.chars();
                } else if let Some(r) = rest.strip_prefix(']') {
                    out.push(']');
                    chars = r.chars();
                }
            }
            '[' => out.push_str(r"\["), // ECMA: a literal inside brackets; regex-syntax: nesting
            ']' if in_class => {
                in_class = false;
                out.push(c);
            }
            '(' if chars.as_str().starts_with("?=")
                || chars.as_str().starts_with("?!")
                || chars.as_str().starts_with("?<=")
                || chars.as_str().starts_with("?<!") =>
            {
                return Err("lookaround assertions are not supported".into());
            }
            _ => out.push(c),
        }
    }
    Ok(out)
}
