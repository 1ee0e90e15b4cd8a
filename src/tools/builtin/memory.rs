//! `memory`: a small persistent key/value notebook per agent, so an agent can keep notes
//! across runs (and across daemon restarts). Notes live in the daemon's store (through its
//! [`ToolData`]), keyed by the token's namespace and the agent id; deleting the agent
//! through the store deletes its notes.
//!
//! Actions: `set` (key, value; overwrites), `get` (key), `list` (optional prefix), `delete`
//! (key). Bounds, so one agent cannot grow the database without limit and a `list` always
//! fits in a model's context: keys of 1 to [`MAX_KEY_CHARS`] characters, values of up to
//! [`MAX_VALUE_CHARS`] characters, at most [`MAX_NOTES`] notes per agent (a `set` of a new
//! key beyond that is an error result telling the model to delete something first).

use std::sync::Arc;

use serde_json::{json, Value};

use crate::store::tool_data::{NoteSet, ToolData};
use crate::store::{Namespace, Store, StoreError};
use crate::tools::{BoxFuture, Tool, ToolContext, ToolError};

pub const NAME: &str = "memory";
pub const MAX_KEY_CHARS: usize = 128;
pub const MAX_VALUE_CHARS: usize = 16 * 1024;
pub const MAX_NOTES: usize = 256;

/// The `memory` tool.
pub struct Memory {
    store: Option<Arc<dyn Store>>,
}

impl Memory {
    /// `None` declares the tool without serving it (every call is an error result).
    pub fn new(store: Option<Arc<dyn Store>>) -> Self {
        Memory { store }
    }
}

/// One parsed call.
enum Action {
    Set { key: String, value: String },
    Get { key: String },
    List { prefix: String },
    Delete { key: String },
}

impl Action {
    fn parse(args: &Value) -> Result<Action, ToolError> {
        let text = |field: &str| args.get(field).and_then(Value::as_str).map(str::to_string);
        let key = |action: &str| {
            text("key").ok_or_else(|| {
                ToolError::invalid_args(format!("action {action:?} needs a \"key\""))
            })
        };
        match args.get("action").and_then(Value::as_str) {
            Some("set") => Ok(Action::Set {
                key: key("set")?,
                value: text("value").ok_or_else(|| {
                    ToolError::invalid_args("action \"set\" needs a \"value\" (a string)")
                })?,
            }),
            Some("get") => Ok(Action::Get { key: key("get")? }),
            Some("delete") => Ok(Action::Delete {
                key: key("delete")?,
            }),
            Some("list") => Ok(Action::List {
                prefix: text("prefix").unwrap_or_default(),
            }),
            // The input schema already restricts `action`; this is for direct callers.
            other => Err(ToolError::invalid_args(format!(
                "unknown action {other:?}: use set, get, list or delete"
            ))),
        }
    }
}

impl Tool for Memory {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        "A persistent notebook for this agent: notes survive across runs. \
         action \"set\" saves a value under a key (replacing any earlier value), \"get\" reads \
         a key, \"list\" shows the saved keys (optionally only those starting with \"prefix\"), \
         \"delete\" removes a key. Keys: 1-128 characters; values: up to 16384 characters; \
         at most 256 notes."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "action": {
                    "type": "string",
                    "enum": ["set", "get", "list", "delete"],
                    "description": "What to do."
                },
                "key": {
                    "type": "string", "minLength": 1, "maxLength": MAX_KEY_CHARS,
                    "description": "The note's name (set, get, delete)."
                },
                "value": {
                    "type": "string", "maxLength": MAX_VALUE_CHARS,
                    "description": "The note's text (set)."
                },
                "prefix": {
                    "type": "string", "maxLength": MAX_KEY_CHARS,
                    "description": "Only list keys starting with this (list)."
                }
            },
            "required": ["action"],
            "additionalProperties": false
        })
    }

    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, Result<Value, ToolError>> {
        Box::pin(async move {
            let action = Action::parse(&args)?;
            let store = self.store.as_ref().ok_or_else(|| {
                ToolError::failed("the memory tool is not connected to a database in this process")
            })?;
            run(store.tool_data(), &ctx.namespace, &ctx.agent_id, action)
                .await
                .map_err(|e| {
                    tracing::error!(target: "callbackd::tools", tool = NAME, error = %e,
                        "memory store call failed");
                    ToolError::failed(format!("the notebook could not be read or written: {e}"))
                })?
        })
    }
}

/// Runs an action. The outer error is the store failing; the inner one a refusal the model
/// should see (a full notebook).
async fn run(
    data: &dyn ToolData,
    ns: &Namespace,
    agent: &str,
    action: Action,
) -> Result<Result<Value, ToolError>, StoreError> {
    Ok(Ok(match action {
        Action::Set { key, value } => {
            match data.memory_set(ns, agent, &key, &value, MAX_NOTES).await? {
                NoteSet::Full => {
                    return Ok(Err(ToolError::failed(format!(
                        "the notebook is full ({MAX_NOTES} notes); delete a note you no \
                     longer need, or overwrite one, before saving {key:?}"
                    ))))
                }
                NoteSet::Saved { replaced, notes } => json!({
                    "key": key, "saved": true, "replaced": replaced,
                    "notes": notes, "maxNotes": MAX_NOTES
                }),
            }
        }
        Action::Get { key } => match data.memory_get(ns, agent, &key).await? {
            Some(note) => json!({
                "key": key, "found": true, "value": note.value, "updatedAt": note.updated_at
            }),
            None => json!({"key": key, "found": false}),
        },
        Action::List { prefix } => {
            let notes: Vec<Value> = data
                .memory_list(ns, agent, &prefix)
                .await?
                .into_iter()
                .map(|n| json!({"key": n.key, "chars": n.chars, "updatedAt": n.updated_at}))
                .collect();
            json!({"count": notes.len(), "maxNotes": MAX_NOTES, "notes": notes})
        }
        Action::Delete { key } => {
            let deleted = data.memory_delete(ns, agent, &key).await?;
            json!({"key": key, "deleted": deleted})
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::{SqliteOptions, SqliteStore};
    use tokio::time::{Duration, Instant};

    async fn call(tool: &Memory, agent: &str, args: Value) -> Result<Value, ToolError> {
        let ctx = ToolContext::new(agent, Instant::now() + Duration::from_secs(5));
        tool.call(args, ctx).await
    }

    #[tokio::test]
    async fn notes_are_per_agent_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&SqliteOptions::new(dir.path().join("m.db"))).unwrap();
        let tool = Memory::new(Some(Arc::new(store)));
        let set = |k: &str, v: &str| json!({"action": "set", "key": k, "value": v});

        call(&tool, "a", set("k", "v1")).await.unwrap();
        let r = call(&tool, "a", set("k", "v2")).await.unwrap();
        assert_eq!(r["replaced"], true);
        let got = call(&tool, "a", json!({"action": "get", "key": "k"}))
            .await
            .unwrap();
        assert_eq!(got["value"], "v2");
        let other = call(&tool, "b", json!({"action": "get", "key": "k"}))
            .await
            .unwrap();
        assert_eq!(other["found"], false);

        for i in 1..MAX_NOTES {
            call(&tool, "a", set(&format!("n{i:03}"), "x"))
                .await
                .unwrap();
        }
        let full = call(&tool, "a", set("one-more", "x")).await.unwrap_err();
        assert!(full.to_string().contains("notebook is full"), "{full}");
        call(&tool, "a", set("k", "overwrite is fine"))
            .await
            .unwrap();

        let listed = call(&tool, "a", json!({"action": "list", "prefix": "n00"}))
            .await
            .unwrap();
        assert_eq!(listed["count"], 9);
        assert_eq!(listed["notes"][0]["key"], "n001");

        let del = call(&tool, "a", json!({"action": "delete", "key": "k"}))
            .await
            .unwrap();
        assert_eq!(del["deleted"], true);
        let del = call(&tool, "a", json!({"action": "delete", "key": "k"}))
            .await
            .unwrap();
        assert_eq!(del["deleted"], false);

        let err = call(&tool, "a", json!({"action": "set", "key": "k"}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("needs a \"value\""), "{err}");
    }
}
