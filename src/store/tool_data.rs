//! [`ToolData`]: what built-in tools keep in the store, beside the contract's substores.
//! Today the `memory` tool's notes. Each backend implements it next to its own tables, so a
//! tool never writes SQL and the backend alone knows the tables (its migrations create
//! them, `agents.delete` cascades to them).

use super::{BoxFuture, Namespace, StoreError};

/// A `memory` note as `get` returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub value: String,
    /// Epoch ms of the last `set`.
    pub updated_at: i64,
}

/// A `memory` note as `list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteInfo {
    pub key: String,
    /// The value's length in characters.
    pub chars: i64,
    pub updated_at: i64,
}

/// What a `memory` set did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoteSet {
    /// Saved; `replaced` when the key existed; `notes` is the agent's count after it.
    Saved { replaced: bool, notes: usize },
    /// Not saved: the key is new and the agent already has `max_notes` notes.
    Full,
}

/// Tool-side data of a backend. Every write is committed before its future resolves.
pub trait ToolData: Send + Sync {
    /// Saves `value` under `key` (replacing it), unless the key is new and the agent has
    /// `max_notes` notes already; the check and the write are one transaction.
    fn memory_set<'a>(
        &'a self,
        ns: &'a Namespace,
        agent_id: &'a str,
        key: &'a str,
        value: &'a str,
        max_notes: usize,
    ) -> BoxFuture<'a, Result<NoteSet, StoreError>>;

    fn memory_get<'a>(
        &'a self,
        ns: &'a Namespace,
        agent_id: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Note>, StoreError>>;

    /// The agent's notes whose key starts with `prefix`, by key.
    fn memory_list<'a>(
        &'a self,
        ns: &'a Namespace,
        agent_id: &'a str,
        prefix: &'a str,
    ) -> BoxFuture<'a, Result<Vec<NoteInfo>, StoreError>>;

    /// Whether a note was deleted.
    fn memory_delete<'a>(
        &'a self,
        ns: &'a Namespace,
        agent_id: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
}
