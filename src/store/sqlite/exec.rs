//! [`Conn`]: the shared SQL ([`crate::store::sql`]) run on a SQLite connection. Every
//! statement runs to completion when called; the operations' futures are driven with
//! [`sql::ready`](crate::store::sql::ready).

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{params_from_iter, Connection, ErrorCode, ToSql};

use crate::store::sql::{Dialect, Exec, Row, Value};
use crate::store::StoreError;

/// A connection (the writer's inside its transaction, or a reader's), statements cached.
pub struct Conn<'c>(pub &'c Connection);

impl Exec for Conn<'_> {
    type Error = StoreError;

    const DIALECT: Dialect = Dialect::Sqlite;

    async fn execute(&self, sql: &str, params: &[Value<'_>]) -> Result<u64, StoreError> {
        let n = self
            .0
            .prepare_cached(sql)?
            .execute(params_from_iter(params))?;
        Ok(n as u64)
    }

    async fn insert_new(&self, sql: &str, params: &[Value<'_>]) -> Result<bool, StoreError> {
        match self
            .0
            .prepare_cached(sql)?
            .execute(params_from_iter(params))
        {
            Ok(_) => Ok(true),
            Err(e) if is_constraint(&e) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    async fn each_row(
        &self,
        sql: &str,
        params: &[Value<'_>],
        each: &mut (dyn FnMut(&dyn Row) -> Result<(), StoreError> + Send),
    ) -> Result<(), StoreError> {
        let mut stmt = self.0.prepare_cached(sql)?;
        let mut rows = stmt.query(params_from_iter(params))?;
        while let Some(row) = rows.next()? {
            each(row)?;
        }
        Ok(())
    }
}

fn is_constraint(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == ErrorCode::ConstraintViolation)
}

impl ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match *self {
            Value::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Value::OptText(Some(s)) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Value::OptText(None) => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Int(n) => ToSqlOutput::from(n),
            Value::OptInt(Some(n)) => ToSqlOutput::from(n),
            Value::OptInt(None) => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Int4(n) => ToSqlOutput::from(n),
            Value::Float(f) => ToSqlOutput::from(f),
            Value::Bool(b) => ToSqlOutput::from(b),
            Value::Bytes(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
            // A JSON array, for `IN (SELECT value FROM json_each(?))`.
            Value::TextList(list) => {
                ToSqlOutput::from(serde_json::to_string(list).expect("strings serialise"))
            }
        })
    }
}

impl Row for rusqlite::Row<'_> {
    fn text(&self, i: usize) -> Result<&str, StoreError> {
        Ok(self.get_ref(i)?.as_str().map_err(rusqlite::Error::from)?)
    }

    fn opt_text(&self, i: usize) -> Result<Option<&str>, StoreError> {
        Ok(self
            .get_ref(i)?
            .as_str_or_null()
            .map_err(rusqlite::Error::from)?)
    }

    fn int(&self, i: usize) -> Result<i64, StoreError> {
        Ok(self.get(i)?)
    }

    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        Ok(self.get(i)?)
    }

    fn float(&self, i: usize) -> Result<f64, StoreError> {
        Ok(self.get(i)?)
    }

    fn bool(&self, i: usize) -> Result<bool, StoreError> {
        Ok(self.get(i)?)
    }

    fn bytes(&self, i: usize) -> Result<&[u8], StoreError> {
        Ok(self.get_ref(i)?.as_blob().map_err(rusqlite::Error::from)?)
    }
}
