//! [`ForkRecords`] on SQLite: the `session_forks` table of migration 0006.

use rusqlite::{params, OptionalExtension, Row};

use super::SqliteStore;
use crate::store::forks::{tools_json, tools_of, ForkRecord, ForkRecords, COLUMNS};
use crate::store::{BoxFuture, Namespace, StoreError};

fn record(r: &Row<'_>) -> rusqlite::Result<ForkRecord> {
    Ok(ForkRecord {
        agent_id: r.get(0)?,
        source_agent_id: r.get(1)?,
        source_run_id: r.get(2)?,
        at: r.get(3)?,
        model: r.get(4)?,
        tools: tools_of(&r.get::<_, String>(5)?),
        created_at_ms: r.get(6)?,
    })
}

impl ForkRecords for SqliteStore {
    fn insert_fork(
        &self,
        ns: &Namespace,
        rec: ForkRecord,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        let ns = ns.as_str().to_string();
        Box::pin(self.write_with(move |conn| {
            conn.prepare_cached(&format!(
                "INSERT INTO session_forks (ns, {COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
            ))?
            .execute(params![
                ns,
                rec.agent_id,
                rec.source_agent_id,
                rec.source_run_id,
                rec.at,
                rec.model,
                tools_json(&rec.tools),
                rec.created_at_ms
            ])?;
            Ok(())
        }))
    }

    fn fork_of(
        &self,
        ns: &Namespace,
        agent_id: &str,
    ) -> BoxFuture<'_, Result<Option<ForkRecord>, StoreError>> {
        let (ns, id) = (ns.as_str().to_string(), agent_id.to_string());
        Box::pin(self.read_with(move |conn| {
            Ok(conn
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM session_forks WHERE ns = ?1 AND agent_id = ?2"
                ))?
                .query_row(params![ns, id], record)
                .optional()?)
        }))
    }

    fn forks_from(
        &self,
        ns: &Namespace,
        source_agent_id: &str,
    ) -> BoxFuture<'_, Result<Vec<ForkRecord>, StoreError>> {
        let (ns, id) = (ns.as_str().to_string(), source_agent_id.to_string());
        Box::pin(self.read_with(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM session_forks WHERE ns = ?1 AND source_agent_id = ?2 \
                 ORDER BY created_at, agent_id"
            ))?;
            let rows = stmt.query_map(params![ns, id], record)?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        }))
    }
}
