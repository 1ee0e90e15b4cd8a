//! [`Db`]: how the PostgreSQL backend runs a statement, prepared or not.
//!
//! Prepared (the default): each statement is prepared once per connection and cached, so a
//! call costs one round trip. Unprepared (`store.prepared_statements = false`): each
//! statement goes as one unnamed Parse/Bind/Execute with its parameter types given, which
//! a transaction-mode connection pooler (PgBouncer, RDS Proxy, Supavisor) can route,
//! whereas a named statement prepared on one server connection is unknown to the next.
//! Every statement carries its parameter types, so both paths run the same SQL.

use deadpool_postgres::{ClientWrapper, Transaction};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Error, Row};

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

    pub async fn query_opt(&self, sql: &str, params: &[Param<'_>]) -> Result<Option<Row>, Error> {
        Ok(self.query(sql, params).await?.into_iter().next())
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

/// `$1 AND ...` conditions under construction, always starting with the namespace. Lists
/// are one `text[]` parameter (`= ANY($n)`), so a statement's text does not depend on how
/// many ids a filter has and stays one cached prepared statement.
pub struct Conditions {
    sql: Vec<String>,
    params: Vec<Value>,
}

/// An owned parameter of [`Conditions`].
pub enum Value {
    Text(String),
    TextArray(Vec<String>),
    Float(f64),
}

impl Conditions {
    pub fn new(ns: &str) -> Self {
        Conditions {
            sql: vec!["ns = $1".into()],
            params: vec![Value::Text(ns.to_string())],
        }
    }

    fn next(&self) -> usize {
        self.params.len() + 1
    }

    pub fn eq(&mut self, column: &str, value: &str) {
        self.sql.push(format!("{column} = ${}", self.next()));
        self.params.push(Value::Text(value.to_string()));
    }

    /// `column = ANY(list)`; `None` adds nothing (no constraint).
    pub fn in_list(&mut self, column: &str, list: Option<&[String]>) {
        if let Some(list) = list {
            self.sql.push(format!("{column} = ANY(${})", self.next()));
            self.params.push(Value::TextArray(list.to_vec()));
        }
    }

    /// `sql` with `{}` standing for each parameter's `$n`, in order.
    pub fn raw(&mut self, sql: &str, params: Vec<Value>) {
        let mut text = String::new();
        let mut n = self.next();
        for (i, part) in sql.split("{}").enumerate() {
            if i > 0 {
                text.push_str(&format!("${n}"));
                n += 1;
            }
            text.push_str(part);
        }
        self.sql.push(text);
        self.params.extend(params);
    }

    pub fn sql(&self) -> String {
        self.sql.join(" AND ")
    }

    /// The number the next parameter after these would get.
    pub fn next_param(&self) -> usize {
        self.next()
    }

    pub fn params(&self) -> Vec<Param<'_>> {
        self.params
            .iter()
            .map(|v| match v {
                Value::Text(s) => (s as &(dyn ToSql + Sync), Type::TEXT),
                Value::TextArray(a) => (a as &(dyn ToSql + Sync), Type::TEXT_ARRAY),
                Value::Float(f) => (f as &(dyn ToSql + Sync), Type::FLOAT8),
            })
            .collect()
    }
}
