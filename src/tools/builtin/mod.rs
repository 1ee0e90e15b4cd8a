//! The tools that ship with the daemon, registered explicitly at startup and each
//! switchable with `tools.disabled`:
//! - [`echo`]: returns its arguments unchanged (a diagnostic for the whole path);
//! - [`memory`]: a small persistent notebook per agent, in the daemon's database;
//! - [`ask_user`]: a question to the person, held until they answer (like an approval);
//! - [`update_plan`]: the agent's plan, shown to people as a checklist.

pub mod ask_user;
pub mod echo;
pub mod memory;
pub mod update_plan;

use std::sync::Arc;

use super::Tool;
use crate::store::Store;

/// The names of the built-in tools.
pub const NAMES: &[&str] = &[echo::NAME, memory::NAME, ask_user::NAME, update_plan::NAME];

/// Every built-in tool. Without a store (e.g. for `tools export`), `memory` is still
/// declared but answers every call with an error.
pub fn builtins(store: Option<Arc<dyn Store>>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(echo::Echo),
        Arc::new(memory::Memory::new(store)),
        Arc::new(ask_user::AskUser),
        Arc::new(update_plan::UpdatePlan),
    ]
}
