//! [`Transfer`] on a SQLite file, for `callbackd copy-store`.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use super::exec::Conn;
use super::{SqliteOptions, SqliteStore};
use crate::store::transfer::{Key, Row, Table, Transfer, TransferError};
use crate::store::{sql, BoxFuture, StoreError};

/// One side of a copy: a connection to the file.
pub struct SqliteTransfer {
    conn: Connection,
    path: PathBuf,
}

impl SqliteTransfer {
    /// An existing database, read-only.
    pub fn source(path: &Path) -> Result<Self, TransferError> {
        if !path.exists() {
            return Err(TransferError::Store(format!(
                "database {} does not exist",
                path.display()
            )));
        }
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| err(path, e))?;
        Ok(SqliteTransfer {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// A database created (or opened) and migrated as the daemon would.
    pub fn target(path: &Path) -> Result<Self, TransferError> {
        drop(
            SqliteStore::open(&SqliteOptions::new(path))
                .map_err(|e| TransferError::Store(format!("{e:#}")))?,
        );
        let conn = Connection::open(path).map_err(|e| err(path, e))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(|e| err(path, e))?;
        Ok(SqliteTransfer {
            conn,
            path: path.to_path_buf(),
        })
    }

    fn read_now(
        &self,
        table: Table,
        after: Option<&Key>,
        limit: usize,
    ) -> Result<Vec<Row>, TransferError> {
        sql::ready(sql::transfer::read(&Conn(&self.conn), table, after, limit))
            .map_err(|e| self.fail(e))?
    }

    fn write_now(&mut self, rows: &[Row]) -> Result<(), TransferError> {
        let path = &self.path;
        let tx = self.conn.transaction().map_err(|e| err(path, e))?;
        sql::ready(sql::transfer::write(&Conn(&tx), rows)).map_err(|e| err(path, e))?;
        tx.commit().map_err(|e| err(path, e))
    }

    fn fail(&self, e: StoreError) -> TransferError {
        err(&self.path, e)
    }
}

fn err(path: &Path, e: impl std::fmt::Display) -> TransferError {
    TransferError::Store(format!("database {}: {e}", path.display()))
}

impl Transfer for SqliteTransfer {
    fn describe(&self) -> String {
        format!("database {}", self.path.display())
    }

    fn count(&mut self, table: Table) -> BoxFuture<'_, Result<u64, TransferError>> {
        let n =
            sql::ready(sql::transfer::count(&Conn(&self.conn), table)).map_err(|e| self.fail(e));
        Box::pin(async move { n })
    }

    fn read<'a>(
        &'a mut self,
        table: Table,
        after: Option<&'a Key>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<Row>, TransferError>> {
        let rows = self.read_now(table, after, limit);
        Box::pin(async move { rows })
    }

    fn write<'a>(&'a mut self, rows: &'a [Row]) -> BoxFuture<'a, Result<(), TransferError>> {
        let done = self.write_now(rows);
        Box::pin(async move { done })
    }

    fn finish(&mut self) -> BoxFuture<'_, Result<(), TransferError>> {
        // Seqs are max(seq) + 1 here: nothing to derive.
        Box::pin(async { Ok(()) })
    }
}
