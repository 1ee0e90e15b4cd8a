//! [`ToolData`] on SQLite: the `memory` tool's notes, table `memory_notes` (created by the
//! migrations, emptied with the agent by `cascade`).

use rusqlite::{params, Connection, OptionalExtension};

use super::SqliteStore;
use crate::store::event_doc::now_ms;
use crate::store::tool_data::{Note, NoteInfo, NoteSet, ToolData};
use crate::store::{BoxFuture, Namespace, StoreError};

impl ToolData for SqliteStore {
    fn memory_set<'a>(
        &'a self,
        ns: &'a Namespace,
        agent_id: &'a str,
        key: &'a str,
        value: &'a str,
        max_notes: usize,
    ) -> BoxFuture<'a, Result<NoteSet, StoreError>> {
        let (ns, agent, key, value) = owned(ns, agent_id, key, value);
        Box::pin(self.write_with(move |conn| {
            let exists: bool = conn
                .prepare_cached(
                    "SELECT 1 FROM memory_notes WHERE ns = ?1 AND agent_id = ?2 AND key = ?3",
                )?
                .query_row(params![ns, agent, key], |_| Ok(()))
                .optional()?
                .is_some();
            let count = note_count(conn, &ns, &agent)?;
            if !exists && count >= max_notes {
                return Ok(NoteSet::Full);
            }
            conn.prepare_cached(
                "INSERT INTO memory_notes (ns, agent_id, key, value, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5) \
                 ON CONFLICT (ns, agent_id, key) \
                 DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            )?
            .execute(params![ns, agent, key, value, now_ms()])?;
            Ok(NoteSet::Saved {
                replaced: exists,
                notes: if exists { count } else { count + 1 },
            })
        }))
    }

    fn memory_get<'a>(
        &'a self,
        ns: &'a Namespace,
        agent_id: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Note>, StoreError>> {
        let (ns, agent, key, _) = owned(ns, agent_id, key, "");
        Box::pin(self.read_with(move |conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT value, updated_at FROM memory_notes \
                     WHERE ns = ?1 AND agent_id = ?2 AND key = ?3",
                )?
                .query_row(params![ns, agent, key], |r| {
                    Ok(Note {
                        value: r.get(0)?,
                        updated_at: r.get(1)?,
                    })
                })
                .optional()?)
        }))
    }

    fn memory_list<'a>(
        &'a self,
        ns: &'a Namespace,
        agent_id: &'a str,
        prefix: &'a str,
    ) -> BoxFuture<'a, Result<Vec<NoteInfo>, StoreError>> {
        let (ns, agent, prefix, _) = owned(ns, agent_id, prefix, "");
        Box::pin(self.read_with(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT key, length(value), updated_at FROM memory_notes \
                 WHERE ns = ?1 AND agent_id = ?2 AND substr(key, 1, length(?3)) = ?3 \
                 ORDER BY key",
            )?;
            let notes = stmt
                .query_map(params![ns, agent, prefix], |r| {
                    Ok(NoteInfo {
                        key: r.get(0)?,
                        chars: r.get(1)?,
                        updated_at: r.get(2)?,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(notes)
        }))
    }

    fn memory_delete<'a>(
        &'a self,
        ns: &'a Namespace,
        agent_id: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let (ns, agent, key, _) = owned(ns, agent_id, key, "");
        Box::pin(self.write_with(move |conn| {
            let n = conn
                .prepare_cached(
                    "DELETE FROM memory_notes WHERE ns = ?1 AND agent_id = ?2 AND key = ?3",
                )?
                .execute(params![ns, agent, key])?;
            Ok(n > 0)
        }))
    }
}

/// The closures run on another thread: they take their inputs by value.
fn owned(ns: &Namespace, a: &str, b: &str, c: &str) -> (String, String, String, String) {
    (ns.as_str().into(), a.into(), b.into(), c.into())
}

fn note_count(conn: &Connection, ns: &str, agent: &str) -> Result<usize, StoreError> {
    let n: i64 = conn
        .prepare_cached("SELECT count(*) FROM memory_notes WHERE ns = ?1 AND agent_id = ?2")?
        .query_row(params![ns, agent], |r| r.get(0))?;
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}
