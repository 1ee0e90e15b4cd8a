//! [`Db`]: how the PostgreSQL backend runs a statement, prepared or not.
//!
//! Prepared (the default): each statement is prepared once per connection and cached, so a
//! call costs one round trip. Unprepared (`store.prepared_statements = false`): each
//! statement goes as one unnamed Parse/Bind/Execute with its parameter types given, which
//! a transaction-mode connection pooler (PgBouncer, RDS Proxy, Supavisor) can route,
//! whereas a named statement prepared on one server connection is unknown to the next.
//! Every statement carries its parameter types, so both paths run the same SQL.

use deadpool_postgres::{ClientWrapper, Transaction};
use futures_util::TryStreamExt;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Error, Row, RowStream};

use super::error::Fail;
use crate::store::sql::{self, Dialect, Exec, Value};
use crate::store::StoreError;

/// One parameter and its PostgreSQL type.
pub type Param<'a> = (&'a (dyn ToSql + Sync), Type);

/// Where statements run: a pooled connection outside a transaction, or a transaction.
#[derive(Clone, Copy)]
pub enum Db<'a> {
    Client(&'a ClientWrapper, bool),
    Tx(&'a Transaction<'a>, bool),
}

impl<'a> Db<'a> {
    pub fn client(c: &'a ClientWrapper, prepared: bool) -> Self {
        Db::Client(c, prepared)
    }

    pub fn tx(t: &'a Transaction<'a>, prepared: bool) -> Self {
        Db::Tx(t, prepared)
    }

    pub async fn query(&self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, Error> {
        match *self {
            Db::Client(c, true) => {
                let stmt = c.prepare_typed_cached(sql, &types(params)).await?;
                c.query(&stmt, &values(params)).await
            }
            Db::Tx(t, true) => {
                let stmt = t.prepare_typed_cached(sql, &types(params)).await?;
                t.query(&stmt, &values(params)).await
            }
            Db::Client(c, false) => c.query_typed(sql, params).await,
            Db::Tx(t, false) => t.query_typed(sql, params).await,
        }
    }

    /// The rows of a statement as they arrive, to be read one at a time (a replay page is
    /// built while its rows are still coming, instead of after all of them were collected).
    pub async fn rows(&self, sql: &str, params: &[Param<'_>]) -> Result<RowStream, Error> {
        let typed = || params.iter().map(|(v, t)| (*v, t.clone()));
        match *self {
            Db::Client(c, true) => {
                let stmt = c.prepare_typed_cached(sql, &types(params)).await?;
                c.query_raw(&stmt, values(params)).await
            }
            Db::Tx(t, true) => {
                let stmt = t.prepare_typed_cached(sql, &types(params)).await?;
                t.query_raw(&stmt, values(params)).await
            }
            Db::Client(c, false) => c.query_typed_raw(sql, typed()).await,
            Db::Tx(t, false) => t.query_typed_raw(sql, typed()).await,
        }
    }

    /// Runs a statement; the number of rows it changed.
    pub async fn execute(&self, sql: &str, params: &[Param<'_>]) -> Result<u64, Error> {
        match *self {
            Db::Client(c, true) => {
                let stmt = c.prepare_typed_cached(sql, &types(params)).await?;
                c.execute(&stmt, &values(params)).await
            }
            Db::Tx(t, true) => {
                let stmt = t.prepare_typed_cached(sql, &types(params)).await?;
                t.execute(&stmt, &values(params)).await
            }
            Db::Client(c, false) => c.execute_typed(sql, params).await,
            Db::Tx(t, false) => t.execute_typed(sql, params).await,
        }
    }
}

fn types(params: &[Param<'_>]) -> Vec<Type> {
    params.iter().map(|(_, t)| t.clone()).collect()
}

fn values<'p>(params: &'p [Param<'_>]) -> Vec<&'p (dyn ToSql + Sync)> {
    params.iter().map(|(v, _)| *v).collect()
}

impl Exec for Db<'_> {
    type Error = Fail;

    const DIALECT: Dialect = Dialect::Postgres;

    async fn execute(&self, sql: &str, params: &[Value<'_>]) -> Result<u64, Fail> {
        Ok(Db::execute(self, sql, &typed(params)).await?)
    }

    async fn insert_new(&self, sql: &str, params: &[Value<'_>]) -> Result<bool, Fail> {
        Ok(Db::execute(self, sql, &typed(params)).await? > 0)
    }

    async fn each_row(
        &self,
        sql: &str,
        params: &[Value<'_>],
        each: &mut (dyn FnMut(&dyn sql::Row) -> Result<(), StoreError> + Send),
    ) -> Result<(), Fail> {
        let rows = self.rows(sql, &typed(params)).await?;
        let mut rows = std::pin::pin!(rows);
        while let Some(row) = rows.try_next().await? {
            each(&row)?;
        }
        Ok(())
    }
}

/// The parameters with their PostgreSQL types: every statement carries them, so the
/// prepared and the unprepared path run the same SQL.
fn typed<'p>(params: &'p [Value<'_>]) -> Vec<Param<'p>> {
    params
        .iter()
        .map(|v| -> Param<'p> {
            match v {
                Value::Text(s) => (s, Type::TEXT),
                Value::OptText(s) => (s, Type::TEXT),
                Value::Int(n) => (n, Type::INT8),
                Value::OptInt(n) => (n, Type::INT8),
                Value::Int4(n) => (n, Type::INT4),
                Value::Float(f) => (f, Type::FLOAT8),
                Value::Bool(b) => (b, Type::BOOL),
                Value::Bytes(b) => (b, Type::BYTEA),
                Value::TextList(l) => (l, Type::TEXT_ARRAY),
            }
        })
        .collect()
}

impl sql::Row for Row {
    fn text(&self, i: usize) -> Result<&str, StoreError> {
        self.try_get(i).map_err(column_error)
    }

    fn opt_text(&self, i: usize) -> Result<Option<&str>, StoreError> {
        self.try_get(i).map_err(column_error)
    }

    fn int(&self, i: usize) -> Result<i64, StoreError> {
        self.opt_int(i)?
            .ok_or_else(|| StoreError::Internal(format!("column {i} is NULL")))
    }

    /// `bigint` or `integer` (what `length()` and a few counters give).
    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        if self.columns().get(i).map(|c| c.type_()) == Some(&Type::INT4) {
            let n: Option<i32> = self.try_get(i).map_err(column_error)?;
            return Ok(n.map(i64::from));
        }
        self.try_get(i).map_err(column_error)
    }

    fn float(&self, i: usize) -> Result<f64, StoreError> {
        self.try_get(i).map_err(column_error)
    }

    fn bool(&self, i: usize) -> Result<bool, StoreError> {
        self.try_get(i).map_err(column_error)
    }

    fn bytes(&self, i: usize) -> Result<&[u8], StoreError> {
        self.try_get(i).map_err(column_error)
    }
}

fn column_error(e: Error) -> StoreError {
    #![allow(clippy::needless_pass_by_value)] // the shape map_err wants
    StoreError::Internal(format!("reading a PostgreSQL row: {e}"))
}
