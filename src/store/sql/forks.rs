//! [`ForkRecords`](crate::store::forks::ForkRecords): the `session_forks` table of migration
//! 0006, written once for both backends (inserts through the backend's writer, reads on its
//! read connections).

use super::{sql, Exec, Row, Value};
use crate::store::forks::{tools_json, tools_of, ForkRecord};
use crate::store::StoreError;

/// Every column but `ns`, in the order [`record`] reads them.
macro_rules! columns {
    () => {
        "agent_id, source_agent_id, source_run_id, at, model, tools, created_at"
    };
}

fn record(r: &dyn Row) -> Result<ForkRecord, StoreError> {
    Ok(ForkRecord {
        agent_id: r.text(0)?.to_string(),
        source_agent_id: r.text(1)?.to_string(),
        source_run_id: r.text(2)?.to_string(),
        at: r.text(3)?.to_string(),
        model: r.text(4)?.to_string(),
        tools: tools_of(r.text(5)?),
        created_at_ms: r.int(6)?,
    })
}

pub async fn insert<X: Exec>(x: &X, ns: &str, rec: &ForkRecord) -> Result<(), X::Error> {
    let sql = sql!(concat!(
        "INSERT INTO session_forks (ns, ",
        columns!(),
        ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
    ));
    let tools = tools_json(&rec.tools);
    let params = [
        Value::Text(ns),
        Value::Text(&rec.agent_id),
        Value::Text(&rec.source_agent_id),
        Value::Text(&rec.source_run_id),
        Value::Text(&rec.at),
        Value::Text(&rec.model),
        Value::Text(&tools),
        Value::Int(rec.created_at_ms),
    ];
    x.execute(sql.get(X::DIALECT), &params).await?;
    Ok(())
}

/// Where `agent_id` was forked from, if it is a fork.
pub async fn fork_of<X: Exec>(
    x: &X,
    ns: &str,
    agent_id: &str,
) -> Result<Option<ForkRecord>, X::Error> {
    let sql = sql!(concat!(
        "SELECT ",
        columns!(),
        " FROM session_forks WHERE ns = ?1 AND agent_id = ?2"
    ));
    x.first(
        sql.get(X::DIALECT),
        &[Value::Text(ns), Value::Text(agent_id)],
        record,
    )
    .await
}

/// The forks made from `source_agent_id`, oldest first.
pub async fn forks_from<X: Exec>(
    x: &X,
    ns: &str,
    source_agent_id: &str,
) -> Result<Vec<ForkRecord>, X::Error> {
    let sql = sql!(concat!(
        "SELECT ",
        columns!(),
        " FROM session_forks WHERE ns = ?1 AND source_agent_id = ?2 \
         ORDER BY created_at, agent_id"
    ));
    let params = [Value::Text(ns), Value::Text(source_agent_id)];
    x.all(sql.get(X::DIALECT), &params, record).await
}

/// `impl ForkRecords for $store`, for a backend with `sql_read` / `sql_write`.
macro_rules! impl_fork_records {
    ($store:ty) => {
        impl $crate::store::forks::ForkRecords for $store {
            fn insert_fork(
                &self,
                ns: &$crate::store::Namespace,
                rec: $crate::store::forks::ForkRecord,
            ) -> $crate::store::BoxFuture<'_, Result<(), $crate::store::StoreError>> {
                let [ns] = $crate::store::sql::owned([ns.as_str()]);
                self.sql_write(move |x| {
                    let (ns, rec) = (ns.clone(), rec.clone());
                    Box::pin(async move { $crate::store::sql::forks::insert(x, &ns, &rec).await })
                })
            }

            fn fork_of(
                &self,
                ns: &$crate::store::Namespace,
                agent_id: &str,
            ) -> $crate::store::BoxFuture<
                '_,
                Result<Option<$crate::store::forks::ForkRecord>, $crate::store::StoreError>,
            > {
                let [ns, id] = $crate::store::sql::owned([ns.as_str(), agent_id]);
                self.sql_read(move |x| {
                    let (ns, id) = (ns.clone(), id.clone());
                    Box::pin(async move { $crate::store::sql::forks::fork_of(x, &ns, &id).await })
                })
            }

            fn forks_from(
                &self,
                ns: &$crate::store::Namespace,
                source_agent_id: &str,
            ) -> $crate::store::BoxFuture<
                '_,
                Result<Vec<$crate::store::forks::ForkRecord>, $crate::store::StoreError>,
            > {
                let [ns, id] = $crate::store::sql::owned([ns.as_str(), source_agent_id]);
                self.sql_read(move |x| {
                    let (ns, id) = (ns.clone(), id.clone());
                    Box::pin(
                        async move { $crate::store::sql::forks::forks_from(x, &ns, &id).await },
                    )
                })
            }
        }
    };
}
pub(crate) use impl_fork_records;
