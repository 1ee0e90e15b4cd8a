//! `update_plan`: the agent's plan as a checklist (`{items: [{title, status}]}`). The tool
//! itself only checks the shape and acknowledges; what people see comes from the bridge's
//! stored call: the run API maps its `running` event to a durable `plan` event with the items
//! (`api::events`), shown as a checklist in the console and in `follow`. Calling it again
//! replaces the plan.

use serde_json::{json, Value};

use crate::tools::{BoxFuture, Tool, ToolContext, ToolError};

pub const NAME: &str = "update_plan";

/// The statuses an item may have.
pub const STATUSES: [&str; 3] = ["pending", "in_progress", "completed"];
/// At most this many items, each title at most this many characters.
pub const MAX_ITEMS: usize = 100;
pub const MAX_TITLE_CHARS: usize = 500;

/// The items of a valid plan, or what is wrong with it (said to the model).
pub fn items(args: &Value) -> Result<&Vec<Value>, String> {
    let items = args
        .get("items")
        .and_then(Value::as_array)
        .ok_or("items must be an array of {title, status}")?;
    if items.len() > MAX_ITEMS {
        return Err(format!(
            "a plan has at most {MAX_ITEMS} items, not {}",
            items.len()
        ));
    }
    for (i, item) in items.iter().enumerate() {
        let title = item.get("title").and_then(Value::as_str);
        match title {
            Some(t) if !t.trim().is_empty() && t.chars().count() <= MAX_TITLE_CHARS => {}
            _ => {
                return Err(format!(
                    "items[{i}].title must be a non-empty string of at most {MAX_TITLE_CHARS} characters"
                ))
            }
        }
        let status = item.get("status").and_then(Value::as_str).unwrap_or("");
        if !STATUSES.contains(&status) {
            return Err(format!(
                "items[{i}].status must be one of {}, not {status:?}",
                STATUSES.join(", ")
            ));
        }
    }
    Ok(items)
}

/// The `update_plan` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct UpdatePlan;

impl Tool for UpdatePlan {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        "Shows your plan to the person as a checklist. Call it with every item each time \
         (it replaces the previous plan); mark one item in_progress while you work on it."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "maxItems": MAX_ITEMS,
                    "items": {
                        "type": "object",
                        "properties": {
                            "title": {"type": "string", "minLength": 1, "maxLength": MAX_TITLE_CHARS},
                            "status": {"enum": STATUSES}
                        },
                        "required": ["title", "status"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["items"],
            "additionalProperties": false
        })
    }

    fn call(&self, args: Value, _ctx: ToolContext) -> BoxFuture<'_, Result<Value, ToolError>> {
        Box::pin(async move {
            let n = items(&args).map_err(ToolError::invalid_args)?.len();
            Ok(json!({"updated": true, "items": n}))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_is_checked_item_by_item() {
        assert!(items(&json!({"items": [{"title": "a", "status": "pending"}]})).is_ok());
        assert!(items(&json!({"items": []})).is_ok());
        for (bad, why) in [
            (json!({}), "items must be an array"),
            (
                json!({"items": [{"title": "", "status": "pending"}]}),
                "items[0].title",
            ),
            (
                json!({"items": [{"title": "a", "status": "done"}]}),
                "items[0].status must be one of",
            ),
        ] {
            assert!(items(&bad).unwrap_err().contains(why), "{bad}");
        }
    }
}
