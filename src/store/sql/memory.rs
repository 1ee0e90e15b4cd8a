//! [`ToolData`](crate::store::ToolData): the `memory` tool's notes, table `memory_notes`
//! (emptied with the agent by [`cascade`](super::cascade)).

use super::{sql, Dialect, Exec, Sql, Value};
use crate::store::event_doc::now_ms;
use crate::store::tool_data::{Note, NoteInfo, NoteSet};

/// The advisory lock class of a `memory` set on PostgreSQL (the key is a hash of namespace
/// and agent).
const NOTES_LOCK: i32 = 0x6362_6d01;

pub async fn set<X: Exec>(
    x: &X,
    ns: &str,
    agent: &str,
    key: &str,
    value: &str,
    max_notes: usize,
) -> Result<NoteSet, X::Error> {
    if X::DIALECT == Dialect::Postgres {
        // Two daemons setting notes of one agent at once: without the lock both could pass
        // the count check and the agent would end up over the limit. (SQLite's one writer
        // runs one set at a time.)
        x.execute(
            "SELECT pg_advisory_xact_lock($1, hashtext($2 || chr(31) || $3))",
            &[Value::Int4(NOTES_LOCK), Value::Text(ns), Value::Text(agent)],
        )
        .await?;
    }
    let sql = sql!("SELECT 1 FROM memory_notes WHERE ns = ?1 AND agent_id = ?2 AND key = ?3");
    let params = [Value::Text(ns), Value::Text(agent), Value::Text(key)];
    let exists = x
        .first(sql.get(X::DIALECT), &params, |_| Ok(()))
        .await?
        .is_some();
    let sql = sql!("SELECT count(*) FROM memory_notes WHERE ns = ?1 AND agent_id = ?2");
    let count = x
        .first(sql.get(X::DIALECT), &params[..2], |r| r.int(0))
        .await?
        .unwrap_or(0);
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    if !exists && count >= max_notes {
        return Ok(NoteSet::Full);
    }
    let sql = sql!(
        "INSERT INTO memory_notes (ns, agent_id, key, value, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5) \
         ON CONFLICT (ns, agent_id, key) \
         DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at"
    );
    let params = [
        Value::Text(ns),
        Value::Text(agent),
        Value::Text(key),
        Value::Text(value),
        Value::Int(now_ms()),
    ];
    x.execute(sql.get(X::DIALECT), &params).await?;
    Ok(NoteSet::Saved {
        replaced: exists,
        notes: if exists { count } else { count + 1 },
    })
}

pub async fn get<X: Exec>(
    x: &X,
    ns: &str,
    agent: &str,
    key: &str,
) -> Result<Option<Note>, X::Error> {
    let sql = sql!(
        "SELECT value, updated_at FROM memory_notes WHERE ns = ?1 AND agent_id = ?2 AND key = ?3"
    );
    let params = [Value::Text(ns), Value::Text(agent), Value::Text(key)];
    x.first(sql.get(X::DIALECT), &params, |r| {
        Ok(Note {
            value: r.text(0)?.to_string(),
            updated_at: r.int(1)?,
        })
    })
    .await
}

pub async fn list<X: Exec>(
    x: &X,
    ns: &str,
    agent: &str,
    prefix: &str,
) -> Result<Vec<NoteInfo>, X::Error> {
    const SQL: Sql = Sql {
        sqlite: "SELECT key, length(value), updated_at FROM memory_notes \
                 WHERE ns = ?1 AND agent_id = ?2 AND substr(key, 1, length(?3)) = ?3 \
                 ORDER BY key",
        postgres: "SELECT key, length(value)::int8, updated_at FROM memory_notes \
                   WHERE ns = $1 AND agent_id = $2 AND left(key, length($3)) = $3 \
                   ORDER BY key",
    };
    let params = [Value::Text(ns), Value::Text(agent), Value::Text(prefix)];
    x.all(SQL.get(X::DIALECT), &params, |r| {
        Ok(NoteInfo {
            key: r.text(0)?.to_string(),
            chars: r.int(1)?,
            updated_at: r.int(2)?,
        })
    })
    .await
}

pub async fn delete<X: Exec>(x: &X, ns: &str, agent: &str, key: &str) -> Result<bool, X::Error> {
    let sql = sql!("DELETE FROM memory_notes WHERE ns = ?1 AND agent_id = ?2 AND key = ?3");
    let params = [Value::Text(ns), Value::Text(agent), Value::Text(key)];
    Ok(x.execute(sql.get(X::DIALECT), &params).await? > 0)
}

/// `impl ToolData for $store`, for a store with `sql_read` and `sql_write` (each backend's
/// way to run a shared operation on a connection and in a transaction).
macro_rules! impl_tool_data {
    ($store:ty) => {
        impl $crate::store::ToolData for $store {
            fn memory_set<'a>(
                &'a self,
                ns: &'a $crate::store::Namespace,
                agent_id: &'a str,
                key: &'a str,
                value: &'a str,
                max_notes: usize,
            ) -> $crate::store::BoxFuture<
                'a,
                Result<$crate::store::tool_data::NoteSet, $crate::store::StoreError>,
            > {
                let args = $crate::store::sql::owned([ns.as_str(), agent_id, key, value]);
                self.sql_write(move |x| {
                    let [ns, agent, key, value] = args.clone();
                    Box::pin(async move {
                        $crate::store::sql::memory::set(x, &ns, &agent, &key, &value, max_notes)
                            .await
                    })
                })
            }

            fn memory_get<'a>(
                &'a self,
                ns: &'a $crate::store::Namespace,
                agent_id: &'a str,
                key: &'a str,
            ) -> $crate::store::BoxFuture<
                'a,
                Result<Option<$crate::store::tool_data::Note>, $crate::store::StoreError>,
            > {
                let args = $crate::store::sql::owned([ns.as_str(), agent_id, key]);
                self.sql_read(move |x| {
                    let [ns, agent, key] = args.clone();
                    Box::pin(
                        async move { $crate::store::sql::memory::get(x, &ns, &agent, &key).await },
                    )
                })
            }

            fn memory_list<'a>(
                &'a self,
                ns: &'a $crate::store::Namespace,
                agent_id: &'a str,
                prefix: &'a str,
            ) -> $crate::store::BoxFuture<
                'a,
                Result<Vec<$crate::store::tool_data::NoteInfo>, $crate::store::StoreError>,
            > {
                let args = $crate::store::sql::owned([ns.as_str(), agent_id, prefix]);
                self.sql_read(move |x| {
                    let [ns, agent, prefix] = args.clone();
                    Box::pin(async move {
                        $crate::store::sql::memory::list(x, &ns, &agent, &prefix).await
                    })
                })
            }

            fn memory_delete<'a>(
                &'a self,
                ns: &'a $crate::store::Namespace,
                agent_id: &'a str,
                key: &'a str,
            ) -> $crate::store::BoxFuture<'a, Result<bool, $crate::store::StoreError>> {
                let args = $crate::store::sql::owned([ns.as_str(), agent_id, key]);
                self.sql_write(move |x| {
                    let [ns, agent, key] = args.clone();
                    Box::pin(async move {
                        $crate::store::sql::memory::delete(x, &ns, &agent, &key).await
                    })
                })
            }
        }
    };
}
pub(crate) use impl_tool_data;
