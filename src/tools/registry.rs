//! [`ToolRegistry`]: the tools a daemon serves, by name, each with its compiled schemas and
//! its limits. Filled once at startup (built-ins, `[[tools.command]]`, plugins); read-only
//! while serving.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::Semaphore;

use super::approval::ApprovalPolicy;
use super::command::CommandTool;
use super::schema::{Schema, SchemaError};
use super::Tool;
use crate::config::{ToolLimitsConfig, ToolsConfig};

/// Limits a tool gets unless it sets its own.
#[derive(Debug, Clone, Copy)]
pub struct ToolLimits {
    pub timeout: Duration,
    pub max_concurrency: usize,
}

impl ToolLimits {
    pub fn from_config(config: &ToolsConfig) -> Self {
        ToolLimits {
            timeout: Duration::from_millis(config.timeout_ms),
            max_concurrency: config.max_concurrency,
        }
    }
}

impl Default for ToolLimits {
    fn default() -> Self {
        Self::from_config(&ToolsConfig::default())
    }
}

/// Why a tool cannot be registered. All of these are startup errors.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("two tools are named {0:?}; tool names must be unique")]
    Duplicate(String),
    #[error("invalid tool name {0:?}: use 1 to 64 of the characters A-Z a-z 0-9 _ -")]
    InvalidName(String),
    /// The schema's own error is part of the message, not a `source`: an `{:#}` chain would
    /// print the keyword's pointer and reason twice.
    #[error("tool {tool:?}: invalid {which} schema {error}")]
    Schema {
        tool: String,
        which: &'static str,
        error: SchemaError,
    },
    #[error("tool {tool:?}: {reason}")]
    Invalid { tool: String, reason: String },
    #[error("tools.{key} names {name:?}, but no tool has that name (tools: {known})")]
    UnknownName {
        key: &'static str,
        name: String,
        known: String,
    },
}

/// A tool as the registry holds it.
pub struct RegisteredTool {
    tool: Arc<dyn Tool>,
    name: String,
    pub(super) input: Schema,
    pub(super) output: Option<Schema>,
    timeout: Duration,
    max_concurrency: usize,
    /// When a call waits for a person (`[tools.limits.NAME] approval`), and for how long.
    approval: ApprovalPolicy,
    approval_timeout: Duration,
    /// `confirm = true`: approving a held call asks for a confirming step.
    confirm: bool,
    /// One permit per call allowed to run at once.
    pub(super) slots: Arc<Semaphore>,
}

impl RegisteredTool {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn tool(&self) -> &Arc<dyn Tool> {
        &self.tool
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    pub fn max_concurrency(&self) -> usize {
        self.max_concurrency
    }

    pub fn approval(&self) -> &ApprovalPolicy {
        &self.approval
    }

    pub fn approval_timeout(&self) -> Duration {
        self.approval_timeout
    }

    /// Whether approving a held call of this tool asks for a confirming step.
    pub fn confirm(&self) -> bool {
        self.confirm
    }

    /// The compiled input schema (edited arguments of an approval are checked against it).
    pub fn input_schema(&self) -> &Schema {
        &self.input
    }

    /// The `CustomToolDefinition` for the bridge: `description` (left out when empty, as
    /// the bridge treats an empty one as absent), `inputSchema`, `outputSchema` if declared.
    pub fn declaration(&self) -> Value {
        let mut decl = Map::new();
        let description = self.tool.description();
        if !description.is_empty() {
            decl.insert("description".into(), description.into());
        }
        decl.insert("inputSchema".into(), self.input.as_value().clone());
        if let Some(output) = &self.output {
            decl.insert("outputSchema".into(), output.as_value().clone());
        }
        Value::Object(decl)
    }
}

/// The tools a daemon serves, sorted by name.
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<RegisteredTool>>,
    defaults: ToolLimits,
    /// `[tools.limits.NAME]`: wins over the tool's own limits and the defaults.
    overrides: BTreeMap<String, ToolLimitsConfig>,
}

impl Default for ToolRegistry {
    fn default() -> Self {
        Self::new(ToolLimits::default())
    }
}

impl ToolRegistry {
    /// An empty registry; tools without limits of their own get `defaults`.
    pub fn new(defaults: ToolLimits) -> Self {
        ToolRegistry {
            tools: BTreeMap::new(),
            defaults,
            overrides: BTreeMap::new(),
        }
    }

    /// The registry a daemon serves: `builtins`, then the `[[tools.command]]` tools, then
    /// `plugins`, leaving out every name in `tools.disabled`, each with its
    /// `[tools.limits.NAME]` if any. A name in either that matches no tool is an error (most
    /// likely a typo that would leave a tool switched on, or its limits unchanged).
    pub fn from_config(
        config: &ToolsConfig,
        builtins: Vec<Arc<dyn Tool>>,
        plugins: &[Arc<dyn Tool>],
    ) -> Result<ToolRegistry, RegistryError> {
        let mut registry = ToolRegistry::new(ToolLimits::from_config(config));
        registry.overrides = config.limits.clone();
        let mut candidates = builtins;
        for c in &config.command {
            // A command tool's own approval keys are its `[tools.limits.NAME]` ones.
            if c.approval.is_some() || c.approval_timeout_ms.is_some() || c.confirm.is_some() {
                let set = registry.overrides.entry(c.name.clone()).or_default();
                if set.approval.is_some() && c.approval.is_some() {
                    return Err(RegistryError::Invalid {
                        tool: c.name.clone(),
                        reason: "approval is set both on the command and in [tools.limits]".into(),
                    });
                }
                set.approval = set.approval.take().or_else(|| c.approval.clone());
                set.approval_timeout_ms = set.approval_timeout_ms.or(c.approval_timeout_ms);
                set.confirm = set.confirm.or(c.confirm);
            }
            let tool = CommandTool::from_config(c).map_err(|reason| RegistryError::Invalid {
                tool: c.name.clone(),
                reason,
            })?;
            candidates.push(Arc::new(tool));
        }
        candidates.extend(plugins.iter().cloned());
        let mut seen = Vec::new();
        for tool in candidates {
            let name = tool.name().to_string();
            let disabled = config.disabled.contains(&name);
            seen.push(name);
            if !disabled {
                registry.register_arc(tool)?;
            }
        }
        let named = config.disabled.iter().map(|n| ("disabled", n));
        let limited = config.limits.keys().map(|n| ("limits", n));
        if let Some((key, name)) = named.chain(limited).find(|(_, n)| !seen.contains(n)) {
            return Err(RegistryError::UnknownName {
                key,
                name: name.clone(),
                known: seen.join(", "),
            });
        }
        Ok(registry)
    }

    /// Adds a tool. Fails on a duplicate or malformed name, a schema the validator cannot
    /// enforce, an input schema that is not for objects, or a zero concurrency limit.
    pub fn register(&mut self, tool: impl Tool) -> Result<(), RegistryError> {
        self.register_arc(Arc::new(tool))
    }

    /// [`register`](Self::register) for a tool that is already shared.
    pub fn register_arc(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let name = tool.name().to_string();
        if !valid_name(&name) {
            return Err(RegistryError::InvalidName(name));
        }
        if self.tools.contains_key(&name) {
            return Err(RegistryError::Duplicate(name));
        }
        let input_value = tool.input_schema();
        match input_value.get("type") {
            None => {}
            Some(Value::String(t)) if t == "object" => {}
            Some(other) => {
                return Err(RegistryError::Invalid {
                    tool: name,
                    reason: format!(
                        "the input schema must describe an object (\"type\": \"object\"), \
                         not {other}: tool arguments are always a JSON object"
                    ),
                })
            }
        }
        let schema_err = |which, error| RegistryError::Schema {
            tool: name.clone(),
            which,
            error,
        };
        let input = Schema::compile(input_value).map_err(|e| schema_err("input", e))?;
        let output = tool
            .output_schema()
            .map(Schema::compile)
            .transpose()
            .map_err(|e| schema_err("output", e))?;
        let set = self.overrides.get(&name).cloned().unwrap_or_default();
        let timeout = set
            .timeout_ms
            .map(Duration::from_millis)
            .or_else(|| tool.timeout())
            .unwrap_or(self.defaults.timeout);
        let max_concurrency = set
            .max_concurrency
            .or_else(|| tool.max_concurrency())
            .unwrap_or(self.defaults.max_concurrency);
        if max_concurrency == 0 {
            return Err(RegistryError::Invalid {
                tool: name,
                reason: "max_concurrency must be at least 1".into(),
            });
        }
        let approval = match &set.approval {
            Some(setting) => {
                ApprovalPolicy::compile(setting, input.as_value()).map_err(|reason| {
                    RegistryError::Invalid {
                        tool: name.clone(),
                        reason,
                    }
                })?
            }
            None => ApprovalPolicy::Never,
        };
        if set.approval_timeout_ms == Some(0) {
            return Err(RegistryError::Invalid {
                tool: name,
                reason: "approval_timeout_ms must be at least 1".into(),
            });
        }
        let approval_timeout = set
            .approval_timeout_ms
            .map_or(super::approval::DEFAULT_TIMEOUT, Duration::from_millis);
        let entry = RegisteredTool {
            tool,
            name: name.clone(),
            input,
            output,
            timeout,
            max_concurrency,
            approval,
            approval_timeout,
            confirm: set.confirm.unwrap_or(false),
            slots: Arc::new(Semaphore::new(max_concurrency)),
        };
        self.tools.insert(name, Arc::new(entry));
        Ok(())
    }

    /// Takes a tool out; `false` if there was none by that name.
    pub fn remove(&mut self, name: &str) -> bool {
        self.tools.remove(name).is_some()
    }

    pub fn get(&self, name: &str) -> Option<Arc<RegisteredTool>> {
        self.tools.get(name).cloned()
    }

    /// The tool names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// What an adapter puts in CreateAgent `options.local.customTools`: tool name →
    /// `{description, inputSchema, outputSchema}`, sorted by name.
    pub fn declarations(&self) -> Value {
        Value::Object(
            self.tools
                .iter()
                .map(|(name, t)| (name.clone(), t.declaration()))
                .collect(),
        )
    }
}

/// Tool names the bridge and the model's MCP layer accept.
fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{BoxFuture, ToolContext, ToolError};
    use serde_json::json;

    struct Named(&'static str, Value);

    impl Tool for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn description(&self) -> &str {
            "d"
        }
        fn input_schema(&self) -> Value {
            self.1.clone()
        }
        fn call(&self, args: Value, _: ToolContext) -> BoxFuture<'_, Result<Value, ToolError>> {
            Box::pin(async move { Ok(args) })
        }
    }

    fn obj() -> Value {
        json!({"type": "object"})
    }

    #[test]
    fn duplicates_are_rejected_and_listing_is_sorted() {
        let mut reg = ToolRegistry::default();
        reg.register(Named("zeta", obj())).unwrap();
        reg.register(Named("alpha", obj())).unwrap();
        assert!(matches!(
            reg.register(Named("zeta", obj())),
            Err(RegistryError::Duplicate(n)) if n == "zeta"
        ));
        assert_eq!(reg.names().collect::<Vec<_>>(), ["alpha", "zeta"]);
        let decls = reg.declarations();
        assert_eq!(
            decls.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["alpha", "zeta"]
        );
        assert_eq!(
            decls["alpha"],
            json!({"description": "d", "inputSchema": {"type": "object"}})
        );
    }

    #[test]
    fn bad_names_and_schemas_fail_at_registration() {
        let mut reg = ToolRegistry::default();
        assert!(matches!(
            reg.register(Named("has space", obj())),
            Err(RegistryError::InvalidName(_))
        ));
        assert!(matches!(
            reg.register(Named("", obj())),
            Err(RegistryError::InvalidName(_))
        ));
        let err = reg
            .register(Named("s", json!({"type": "string"})))
            .unwrap_err();
        assert!(err.to_string().contains("must describe an object"), "{err}");
        let err = reg
            .register(Named(
                "c",
                json!({"type": "object", "properties": {"a": {"contains": {}}}}),
            ))
            .unwrap_err();
        assert!(err.to_string().contains("contains"), "{err}");
    }
}
