//! [`Exec`]: what a backend gives the shared SQL to run its statements on.

use super::Dialect;
use crate::store::StoreError;

/// A statement parameter, borrowed from the call.
#[derive(Debug, Clone, Copy)]
pub enum Value<'a> {
    Text(&'a str),
    /// `NULL` when `None`.
    OptText(Option<&'a str>),
    Int(i64),
    /// `NULL` when `None`.
    OptInt(Option<i64>),
    /// For the few `integer` (32-bit) columns and arguments of PostgreSQL.
    Int4(i32),
    Float(f64),
    Bool(bool),
    Bytes(&'a [u8]),
    /// A list of strings, tested with [`Dialect::in_list`].
    TextList(&'a [String]),
}

/// One row of a result, its columns read by position. Text is borrowed from the row.
pub trait Row {
    fn text(&self, i: usize) -> Result<&str, StoreError>;
    fn opt_text(&self, i: usize) -> Result<Option<&str>, StoreError>;
    fn int(&self, i: usize) -> Result<i64, StoreError>;
    fn opt_int(&self, i: usize) -> Result<Option<i64>, StoreError>;
    fn float(&self, i: usize) -> Result<f64, StoreError>;
    fn bool(&self, i: usize) -> Result<bool, StoreError>;
    fn bytes(&self, i: usize) -> Result<&[u8], StoreError>;
}

/// Where statements run: a connection, inside a transaction for the writing calls.
#[allow(async_fn_in_trait)] // static dispatch only: each backend's futures are what it needs
pub trait Exec {
    /// A failed statement, or a refusal ([`StoreError`]) decided by the shared code.
    type Error: From<StoreError>;

    const DIALECT: Dialect;

    /// Runs a statement; the number of rows it changed.
    async fn execute(&self, sql: &str, params: &[Value<'_>]) -> Result<u64, Self::Error>;

    /// Runs an `INSERT` of a row with a unique key: `false` (and nothing written, the
    /// transaction still usable) when a row with that key exists. The statement ends with
    /// `ON CONFLICT … DO NOTHING` on PostgreSQL; on SQLite the constraint error tells.
    async fn insert_new(&self, sql: &str, params: &[Value<'_>]) -> Result<bool, Self::Error>;

    /// Runs a query and hands each row to `each`, in order.
    async fn each_row(
        &self,
        sql: &str,
        params: &[Value<'_>],
        each: &mut (dyn FnMut(&dyn Row) -> Result<(), StoreError> + Send),
    ) -> Result<(), Self::Error>;

    /// The first row's value of `read`, if any row.
    async fn first<T: Send>(
        &self,
        sql: &str,
        params: &[Value<'_>],
        read: impl Fn(&dyn Row) -> Result<T, StoreError> + Sync,
    ) -> Result<Option<T>, Self::Error> {
        let mut out = None;
        self.each_row(sql, params, &mut |row| {
            if out.is_none() {
                out = Some(read(row)?);
            }
            Ok(())
        })
        .await?;
        Ok(out)
    }

    /// Every row's value of `read`.
    async fn all<T: Send>(
        &self,
        sql: &str,
        params: &[Value<'_>],
        read: impl Fn(&dyn Row) -> Result<T, StoreError> + Sync,
    ) -> Result<Vec<T>, Self::Error> {
        let mut out = Vec::new();
        self.each_row(sql, params, &mut |row| {
            out.push(read(row)?);
            Ok(())
        })
        .await?;
        Ok(out)
    }
}
