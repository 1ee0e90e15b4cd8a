//! [`ThreadRecords`](crate::store::threads::ThreadRecords): the `ag_ui_threads` table of
//! migration 0009, written once for both backends.

use super::{sql, Exec, Row, Value};
use crate::store::StoreError;

fn agent(r: &dyn Row) -> Result<String, StoreError> {
    Ok(r.text(0)?.to_string())
}

/// Records the alias unless the thread has one; the thread's agent afterwards.
pub async fn claim<X: Exec>(
    x: &X,
    ns: &str,
    thread_id: &str,
    agent_id: &str,
    created_at_ms: i64,
) -> Result<String, X::Error> {
    let insert = sql!(
        "INSERT INTO ag_ui_threads (ns, thread_id, agent_id, created_at) \
         VALUES (?1, ?2, ?3, ?4) ON CONFLICT (ns, thread_id) DO NOTHING"
    );
    let params = [
        Value::Text(ns),
        Value::Text(thread_id),
        Value::Text(agent_id),
        Value::Int(created_at_ms),
    ];
    x.execute(insert.get(X::DIALECT), &params).await?;
    Ok(session(x, ns, thread_id)
        .await?
        .unwrap_or_else(|| agent_id.to_string()))
}

/// The agent `thread_id` is an alias of.
pub async fn session<X: Exec>(
    x: &X,
    ns: &str,
    thread_id: &str,
) -> Result<Option<String>, X::Error> {
    let sql = sql!("SELECT agent_id FROM ag_ui_threads WHERE ns = ?1 AND thread_id = ?2");
    x.first(
        sql.get(X::DIALECT),
        &[Value::Text(ns), Value::Text(thread_id)],
        agent,
    )
    .await
}

/// `impl ThreadRecords for $store`, for a backend with `sql_read` / `sql_write`.
macro_rules! impl_thread_records {
    ($store:ty) => {
        impl $crate::store::threads::ThreadRecords for $store {
            fn claim_thread(
                &self,
                ns: &$crate::store::Namespace,
                thread_id: &str,
                agent_id: &str,
                created_at_ms: i64,
            ) -> $crate::store::BoxFuture<'_, Result<String, $crate::store::StoreError>> {
                let [ns, thread, agent] =
                    $crate::store::sql::owned([ns.as_str(), thread_id, agent_id]);
                self.sql_write(move |x| {
                    let (ns, thread, agent) = (ns.clone(), thread.clone(), agent.clone());
                    Box::pin(async move {
                        $crate::store::sql::threads::claim(x, &ns, &thread, &agent, created_at_ms)
                            .await
                    })
                })
            }

            fn thread_session(
                &self,
                ns: &$crate::store::Namespace,
                thread_id: &str,
            ) -> $crate::store::BoxFuture<'_, Result<Option<String>, $crate::store::StoreError>>
            {
                let [ns, thread] = $crate::store::sql::owned([ns.as_str(), thread_id]);
                self.sql_read(move |x| {
                    let (ns, thread) = (ns.clone(), thread.clone());
                    Box::pin(
                        async move { $crate::store::sql::threads::session(x, &ns, &thread).await },
                    )
                })
            }
        }
    };
}
pub(crate) use impl_thread_records;
