//! [`ToolData`] on PostgreSQL: the `memory` tool's notes, table `memory_notes`.

use tokio_postgres::types::Type;

use super::PgStore;
use crate::store::event_doc::now_ms;
use crate::store::tool_data::{Note, NoteInfo, NoteSet, ToolData};
use crate::store::{BoxFuture, Namespace, StoreError};

/// The advisory lock class of a `memory` set (the key is a hash of namespace and agent).
const NOTES_LOCK: i32 = 0x6362_6d01;

impl ToolData for PgStore {
    fn memory_set<'a>(
        &'a self,
        ns: &'a Namespace,
        agent_id: &'a str,
        key: &'a str,
        value: &'a str,
        max_notes: usize,
    ) -> BoxFuture<'a, Result<NoteSet, StoreError>> {
        let (ns, agent, key, value) = owned(ns, agent_id, key, value);
        self.run_tx(move |db| {
            let (ns, agent, key, value) = (ns.clone(), agent.clone(), key.clone(), value.clone());
            Box::pin(async move {
                let db = &db;
                // Two daemons setting notes of one agent at once: without the lock both
                // could pass the count check and the agent would end up over the limit.
                db.execute(
                    "SELECT pg_advisory_xact_lock($1, hashtext($2 || chr(31) || $3))",
                    &[
                        (&NOTES_LOCK, Type::INT4),
                        (&ns, Type::TEXT),
                        (&agent, Type::TEXT),
                    ],
                )
                .await?;
                let exists = db
                    .query_opt(
                        "SELECT 1 FROM memory_notes WHERE ns = $1 AND agent_id = $2 AND key = $3",
                        &[(&ns, Type::TEXT), (&agent, Type::TEXT), (&key, Type::TEXT)],
                    )
                    .await?
                    .is_some();
                let count: i64 = db
                    .query(
                        "SELECT count(*) FROM memory_notes WHERE ns = $1 AND agent_id = $2",
                        &[(&ns, Type::TEXT), (&agent, Type::TEXT)],
                    )
                    .await?[0]
                    .get(0);
                let count = usize::try_from(count).unwrap_or(usize::MAX);
                if !exists && count >= max_notes {
                    return Ok(NoteSet::Full);
                }
                db.execute(
                    "INSERT INTO memory_notes (ns, agent_id, key, value, updated_at) \
                     VALUES ($1, $2, $3, $4, $5) \
                     ON CONFLICT (ns, agent_id, key) \
                     DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                    &[
                        (&ns, Type::TEXT),
                        (&agent, Type::TEXT),
                        (&key, Type::TEXT),
                        (&value, Type::TEXT),
                        (&now_ms(), Type::INT8),
                    ],
                )
                .await?;
                Ok(NoteSet::Saved {
                    replaced: exists,
                    notes: if exists { count } else { count + 1 },
                })
            })
        })
    }

    fn memory_get<'a>(
        &'a self,
        ns: &'a Namespace,
        agent_id: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Note>, StoreError>> {
        let (ns, agent, key, _) = owned(ns, agent_id, key, "");
        self.run_read(move |db| {
            let (ns, agent, key) = (ns.clone(), agent.clone(), key.clone());
            Box::pin(async move {
                let row = db
                    .query_opt(
                        "SELECT value, updated_at FROM memory_notes \
                         WHERE ns = $1 AND agent_id = $2 AND key = $3",
                        &[(&ns, Type::TEXT), (&agent, Type::TEXT), (&key, Type::TEXT)],
                    )
                    .await?;
                Ok(row.map(|r| Note {
                    value: r.get(0),
                    updated_at: r.get(1),
                }))
            })
        })
    }

    fn memory_list<'a>(
        &'a self,
        ns: &'a Namespace,
        agent_id: &'a str,
        prefix: &'a str,
    ) -> BoxFuture<'a, Result<Vec<NoteInfo>, StoreError>> {
        let (ns, agent, prefix, _) = owned(ns, agent_id, prefix, "");
        self.run_read(move |db| {
            let (ns, agent, prefix) = (ns.clone(), agent.clone(), prefix.clone());
            Box::pin(async move {
                let rows = db
                    .query(
                        "SELECT key, length(value)::int8, updated_at FROM memory_notes \
                         WHERE ns = $1 AND agent_id = $2 AND left(key, length($3)) = $3 \
                         ORDER BY key",
                        &[
                            (&ns, Type::TEXT),
                            (&agent, Type::TEXT),
                            (&prefix, Type::TEXT),
                        ],
                    )
                    .await?;
                Ok(rows
                    .iter()
                    .map(|r| NoteInfo {
                        key: r.get(0),
                        chars: r.get(1),
                        updated_at: r.get(2),
                    })
                    .collect())
            })
        })
    }

    fn memory_delete<'a>(
        &'a self,
        ns: &'a Namespace,
        agent_id: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let (ns, agent, key, _) = owned(ns, agent_id, key, "");
        self.run_tx(move |db| {
            let (ns, agent, key) = (ns.clone(), agent.clone(), key.clone());
            Box::pin(async move {
                let n = db
                    .execute(
                        "DELETE FROM memory_notes WHERE ns = $1 AND agent_id = $2 AND key = $3",
                        &[(&ns, Type::TEXT), (&agent, Type::TEXT), (&key, Type::TEXT)],
                    )
                    .await?;
                Ok(n > 0)
            })
        })
    }
}

fn owned(ns: &Namespace, a: &str, b: &str, c: &str) -> (String, String, String, String) {
    (ns.as_str().into(), a.into(), b.into(), c.into())
}
