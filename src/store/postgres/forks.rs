//! [`ForkRecords`] on PostgreSQL: the `session_forks` table of migration 0006, with the
//! SQLite backend's semantics.

use tokio_postgres::types::Type;
use tokio_postgres::Row;

use super::PgStore;
use crate::store::forks::{tools_json, tools_of, ForkRecord, ForkRecords, COLUMNS};
use crate::store::{BoxFuture, Namespace, StoreError};

fn record(r: &Row) -> ForkRecord {
    ForkRecord {
        agent_id: r.get(0),
        source_agent_id: r.get(1),
        source_run_id: r.get(2),
        at: r.get(3),
        model: r.get(4),
        tools: tools_of(r.get(5)),
        created_at_ms: r.get(6),
    }
}

impl ForkRecords for PgStore {
    fn insert_fork(
        &self,
        ns: &Namespace,
        rec: ForkRecord,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        let ns = ns.as_str().to_string();
        self.run_tx(move |db| {
            let (ns, rec) = (ns.clone(), rec.clone());
            Box::pin(async move {
                let tools = tools_json(&rec.tools);
                db.execute(
                    &format!(
                        "INSERT INTO session_forks (ns, {COLUMNS}) VALUES ($1, $2, $3, $4, $5, \
                         $6, $7, $8)"
                    ),
                    &[
                        (&ns, Type::TEXT),
                        (&rec.agent_id, Type::TEXT),
                        (&rec.source_agent_id, Type::TEXT),
                        (&rec.source_run_id, Type::TEXT),
                        (&rec.at, Type::TEXT),
                        (&rec.model, Type::TEXT),
                        (&tools, Type::TEXT),
                        (&rec.created_at_ms, Type::INT8),
                    ],
                )
                .await?;
                Ok(())
            })
        })
    }

    fn fork_of(
        &self,
        ns: &Namespace,
        agent_id: &str,
    ) -> BoxFuture<'_, Result<Option<ForkRecord>, StoreError>> {
        let (ns, id) = (ns.as_str().to_string(), agent_id.to_string());
        self.run_read(move |db| {
            let (ns, id) = (ns.clone(), id.clone());
            Box::pin(async move {
                let row = db
                    .query_opt(
                        &format!(
                            "SELECT {COLUMNS} FROM session_forks WHERE ns = $1 AND agent_id = $2"
                        ),
                        &[(&ns, Type::TEXT), (&id, Type::TEXT)],
                    )
                    .await?;
                Ok(row.as_ref().map(record))
            })
        })
    }

    fn forks_from(
        &self,
        ns: &Namespace,
        source_agent_id: &str,
    ) -> BoxFuture<'_, Result<Vec<ForkRecord>, StoreError>> {
        let (ns, id) = (ns.as_str().to_string(), source_agent_id.to_string());
        self.run_read(move |db| {
            let (ns, id) = (ns.clone(), id.clone());
            Box::pin(async move {
                let rows = db
                    .query(
                        &format!(
                            "SELECT {COLUMNS} FROM session_forks WHERE ns = $1 AND \
                             source_agent_id = $2 ORDER BY created_at, agent_id"
                        ),
                        &[(&ns, Type::TEXT), (&id, Type::TEXT)],
                    )
                    .await?;
                Ok(rows.iter().map(record).collect())
            })
        })
    }
}
