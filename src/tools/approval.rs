//! [`ApprovalPolicy`]: when a tool call waits for a person. Set per tool in
//! `[tools.limits.NAME]` or on a `[[tools.command]]` block:
//!
//! ```toml
//! approval = "never"                                  # the default
//! approval = "always"
//! approval = { pointer = "/env", values = ["prod"] }  # held when args.env is "prod"
//! approval = { pointer = "/target", pattern = "^prod-" }
//! approval_timeout_ms = 600000                        # then the call is denied
//! ```
//!
//! A rule holds the call when the value at `pointer` is one of `values` (compared as JSON)
//! or a string matching `pattern`; when the arguments have no value there, the call is held
//! too (a rule that cannot be checked fails safe). A rule must name an argument the tool's
//! input schema declares (`properties` at each step), so a typo cannot silently approve
//! everything: that is a startup error naming the tool.

use std::time::Duration;

use serde_json::Value;

pub use crate::config::ApprovalSetting;
use crate::tools::schema::pattern::Pattern;

/// Default time a held call waits for a decision.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// A compiled policy.
#[derive(Debug, Clone, Default)]
pub enum ApprovalPolicy {
    #[default]
    Never,
    Always,
    Rule(Box<Rule>),
}

/// A rule on one argument.
#[derive(Debug, Clone)]
pub struct Rule {
    pointer: String,
    values: Vec<Value>,
    pattern: Option<Pattern>,
}

impl ApprovalPolicy {
    /// Compiles `setting` for a tool whose input schema is `schema`.
    pub fn compile(setting: &ApprovalSetting, schema: &Value) -> Result<ApprovalPolicy, String> {
        match setting {
            ApprovalSetting::Mode(m) => match m.as_str() {
                "never" => Ok(ApprovalPolicy::Never),
                "always" => Ok(ApprovalPolicy::Always),
                other => Err(format!(
                    "approval = {other:?}: use \"never\", \"always\", or a rule \
                     {{ pointer = \"/arg\", values = [...] }} / {{ pointer, pattern }}"
                )),
            },
            ApprovalSetting::Rule {
                pointer,
                values,
                pattern,
            } => {
                if values.is_none() == pattern.is_none() {
                    return Err(format!(
                        "approval rule on {pointer:?} needs exactly one of values or pattern"
                    ));
                }
                declared(schema, pointer)?;
                let pattern = pattern
                    .as_deref()
                    .map(|p| Pattern::new(p).map_err(|e| format!("approval pattern {p:?}: {e}")))
                    .transpose()?;
                Ok(ApprovalPolicy::Rule(Box::new(Rule {
                    pointer: pointer.clone(),
                    values: values.clone().unwrap_or_default(),
                    pattern,
                })))
            }
        }
    }

    /// Whether a call with these arguments waits for a decision.
    pub fn holds(&self, args: &Value) -> bool {
        match self {
            ApprovalPolicy::Never => false,
            ApprovalPolicy::Always => true,
            ApprovalPolicy::Rule(rule) => match args.pointer(&rule.pointer) {
                None => true,
                Some(v) => match &rule.pattern {
                    Some(p) => v.as_str().is_none_or(|s| p.is_match(s)),
                    None => rule.values.contains(v),
                },
            },
        }
    }
}

/// Checks that every step of `pointer` is a declared property of `schema`.
fn declared(schema: &Value, pointer: &str) -> Result<(), String> {
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(format!(
            "approval pointer {pointer:?} must be a JSON pointer to an argument, like \"/env\""
        ));
    };
    let mut at = schema;
    let mut path = String::new();
    for step in rest.split('/') {
        let step = step.replace("~1", "/").replace("~0", "~");
        path.push('/');
        path.push_str(&step);
        match at.get("properties").and_then(|p| p.get(&step)) {
            Some(next) => at = next,
            None => {
                return Err(format!(
                    "approval pointer {pointer:?} names {path:?}, which the tool's input schema \
                     does not declare (no \"properties\" entry): the rule could never see it"
                ))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(pointer: &str, values: Option<Value>, pattern: Option<&str>) -> ApprovalSetting {
        ApprovalSetting::Rule {
            pointer: pointer.into(),
            values: values.map(|v| v.as_array().unwrap().clone()),
            pattern: pattern.map(str::to_string),
        }
    }

    #[test]
    fn a_rule_holds_prod_and_lets_dev_through() {
        let schema = json!({"type": "object", "properties": {"env": {"type": "string"}}});
        let p =
            ApprovalPolicy::compile(&rule("/env", Some(json!(["prod"])), None), &schema).unwrap();
        assert!(p.holds(&json!({"env": "prod"})));
        assert!(!p.holds(&json!({"env": "dev"})));
        assert!(
            p.holds(&json!({})),
            "an argument the rule cannot see is held"
        );
        let p = ApprovalPolicy::compile(&rule("/env", None, Some("^prod")), &schema).unwrap();
        assert!(p.holds(&json!({"env": "prod-eu"})));
        assert!(!p.holds(&json!({"env": "staging"})));
    }

    #[test]
    fn a_rule_on_an_undeclared_argument_is_refused() {
        let schema = json!({"type": "object", "properties": {"env": {"type": "string"}}});
        let e = ApprovalPolicy::compile(&rule("/enviroment", Some(json!(["prod"])), None), &schema)
            .unwrap_err();
        assert!(e.contains("/enviroment"), "{e}");
        assert!(ApprovalPolicy::compile(&rule("env", Some(json!([1])), None), &schema).is_err());
        assert!(ApprovalPolicy::compile(&rule("/env", None, None), &schema).is_err());
        assert!(
            ApprovalPolicy::compile(&ApprovalSetting::Mode("sometimes".into()), &schema).is_err()
        );
    }
}
