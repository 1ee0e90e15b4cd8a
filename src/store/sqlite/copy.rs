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
}
