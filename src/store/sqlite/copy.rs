//! A consistent copy of a live database, for `callbackd backup`: `VACUUM INTO` from a read
//! connection, and `PRAGMA quick_check` of the result.
//!
//! Why not SQLite's online backup API: it copies page by page and starts over whenever
//! another connection writes, so on a database the bridge appends to several times a second
//! it may never finish. `VACUUM INTO` runs inside one read transaction: in WAL mode writers
//! go on committing while it copies the snapshot it started from.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

/// Bytes the copy of the database at `src` will have, about: its pages in use.
pub fn estimated_copy_bytes(src: &Path) -> rusqlite::Result<u64> {
    let conn = open_read(src)?;
    let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
    let free: i64 = conn.query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
    let size: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    Ok(u64::try_from((pages - free).max(0) * size).unwrap_or(0))
}

/// Writes a consistent, compacted copy of the database at `src` to `dest`, which must not
/// exist or be an empty file. Appends to `src` by other connections go on meanwhile.
pub fn vacuum_into(src: &Path, dest: &Path) -> rusqlite::Result<()> {
    let conn = open_read(src)?;
    let dest = dest
        .to_str()
        .ok_or_else(|| rusqlite::Error::InvalidPath(dest.to_path_buf()))?;
    conn.execute("VACUUM INTO ?1", [dest])?;
    Ok(())
}

/// `PRAGMA quick_check` of the database at `path`: the lines other than `ok` (none when
/// the file is sound).
pub fn quick_check(path: &Path) -> rusqlite::Result<Vec<String>> {
    let conn = open_read(path)?;
    let mut stmt = conn.prepare("PRAGMA quick_check")?;
    let lines = stmt.query_map([], |r| r.get::<_, String>(0))?;
    let mut problems = Vec::new();
    for line in lines {
        let line = line?;
        if line != "ok" {
            problems.push(line);
        }
    }
    Ok(problems)
}

/// Why a copy could not be narrowed to one namespace.
#[derive(Debug, thiserror::Error)]
pub enum NarrowError {
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// A table whose rows cannot be told apart by namespace: keeping it could hand another
    /// namespace's data over, dropping it could lose this one's.
    #[error(
        "table {0} has no ns column, so a backup of one namespace cannot tell whose its rows are"
    )]
    NotNamespaced(String),
}

/// What [`keep_only_namespace`] left in the copy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Narrowed {
    /// Every table with its rows (all of the kept namespace), in the order of the schema.
    pub kept: Vec<(String, u64)>,
    /// Rows of other namespaces deleted.
    pub removed: u64,
}

impl Narrowed {
    pub fn kept_rows(&self) -> u64 {
        self.kept.iter().map(|(_, n)| n).sum()
    }
}

/// Deletes every row of a namespace other than `ns` from the database at `path` (a copy
/// nobody else has open), from every table (each must have an `ns` column), then `VACUUM`s
/// it, so that no page of the file keeps what was deleted.
pub fn keep_only_namespace(path: &Path, ns: &str) -> Result<Narrowed, NarrowError> {
    let mut conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    let tables: Vec<(String, bool)> = conn
        .prepare(
            "SELECT m.name, EXISTS (SELECT 1 FROM pragma_table_info(m.name) WHERE name = 'ns') \
             FROM sqlite_schema m WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite\\_%' ESCAPE '\\' \
             ORDER BY m.rowid",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    if let Some((table, _)) = tables.iter().find(|(_, has_ns)| !has_ns) {
        return Err(NarrowError::NotNamespaced(table.clone()));
    }
    let mut narrowed = Narrowed::default();
    let tx = conn.transaction()?;
    for (table, _) in &tables {
        let table = table.replace('"', "\"\"");
        let removed = tx.execute(&format!("DELETE FROM \"{table}\" WHERE ns IS NOT ?1"), [ns])?;
        narrowed.removed += removed as u64;
        let kept: i64 = tx.query_row(&format!("SELECT COUNT(*) FROM \"{table}\""), [], |r| {
            r.get(0)
        })?;
        narrowed
            .kept
            .push((table, u64::try_from(kept).unwrap_or(0)));
    }
    tx.commit()?;
    conn.execute_batch("VACUUM")?;
    conn.close().map_err(|(_, e)| e)?;
    Ok(narrowed)
}

fn open_read(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_of_a_wal_database_has_its_rows_and_checks_clean() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src.db");
        let conn = Connection::open(&src).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.execute_batch(
            "CREATE TABLE t (x); \
             WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < 1000) \
             INSERT INTO t SELECT x FROM s;",
        )
        .unwrap();
        assert!(estimated_copy_bytes(&src).unwrap() >= 4096);
        let dest = dir.path().join("copy.db");
        vacuum_into(&src, &dest).unwrap();
        assert_eq!(quick_check(&dest).unwrap(), Vec::<String>::new());
        let copy = Connection::open(&dest).unwrap();
        let n: i64 = copy
            .query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1000);
        // A file that is not empty is never overwritten.
        assert!(vacuum_into(&src, &dest).is_err());
    }

    #[tokio::test]
    async fn a_copy_narrowed_to_one_namespace_keeps_its_rows_in_every_table() {
        use crate::store::sqlite::{SqliteOptions, SqliteStore};
        use crate::store::transfer::Table;
        use crate::store::{Namespace, Store, StoreCall};

        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src.db");
        let store = SqliteStore::open(&SqliteOptions::new(&src)).unwrap();
        for ns in ["a", "b", "c"] {
            let call = StoreCall::parse(
                "checkpoints",
                "create",
                &format!(r#"{{"agentId":"same","blobId":"secret-of-{ns}","data":"AAECAw=="}}"#),
            )
            .unwrap();
            store.call(&Namespace::new(ns), call).await.unwrap();
        }
        drop(store);
        let dest = dir.path().join("copy.db");
        vacuum_into(&src, &dest).unwrap();
        let narrowed = keep_only_namespace(&dest, "b").unwrap();
        // Every table of the schema is one the store knows, and all were narrowed.
        let tables: Vec<&str> = narrowed.kept.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(tables, Table::ALL.map(Table::name));
        assert_eq!(narrowed.kept_rows(), 1);
        assert_eq!(narrowed.removed, 2);
        let copy = Connection::open(&dest).unwrap();
        let blobs: String = copy
            .query_row(
                "SELECT group_concat(ns || ':' || blob_id) FROM checkpoints",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(blobs, "b:secret-of-b");
        drop(copy);
        // Vacuumed: the deleted rows are nowhere in the file.
        let bytes = std::fs::read(&dest).unwrap();
        let has = |s: &str| bytes.windows(s.len()).any(|w| w == s.as_bytes());
        assert!(has("secret-of-b"));
        assert!(!has("secret-of-a") && !has("secret-of-c"));
        assert_eq!(quick_check(&dest).unwrap(), Vec::<String>::new());

        // A table without an ns column is refused, and nothing is deleted.
        let conn = Connection::open(&src).unwrap();
        conn.execute_batch("CREATE TABLE loose (x)").unwrap();
        drop(conn);
        let dest = dir.path().join("copy2.db");
        vacuum_into(&src, &dest).unwrap();
        let err = keep_only_namespace(&dest, "b").unwrap_err();
        assert!(
            err.to_string().contains("table loose has no ns column"),
            "{err}"
        );
        let n: i64 = Connection::open(&dest)
            .unwrap()
            .query_row("SELECT COUNT(*) FROM checkpoints", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 3);
    }
}
