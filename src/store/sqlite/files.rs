//! The files of a SQLite database: the database file, and the `-wal` and `-shm` files that
//! WAL mode keeps beside it; their sizes, and giving the WAL's space back.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::Connection;

use crate::store::StoreError;

/// The write-ahead log of the database at `db`.
pub fn wal_path(db: &Path) -> PathBuf {
    suffixed(db, "-wal")
}

/// The shared-memory index of the WAL of the database at `db`.
pub fn shm_path(db: &Path) -> PathBuf {
    suffixed(db, "-shm")
}

fn suffixed(db: &Path, suffix: &str) -> PathBuf {
    let mut name = OsString::from(db.as_os_str());
    name.push(suffix);
    PathBuf::from(name)
}

/// Sizes in bytes of the database file and of its WAL (0 for a file that does not exist).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileSizes {
    pub database: u64,
    pub wal: u64,
}

/// Reads both sizes (two `stat`s; cheap enough for each metrics scrape).
pub fn sizes(db: &Path) -> FileSizes {
    let len = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    FileSizes {
        database: len(db),
        wal: len(&wal_path(db)),
    }
}

/// Folds the WAL into the database file and truncates both (`wal_checkpoint(TRUNCATE)`), so
/// that the space a prune freed is given back: after `callbackd prune`, on a database the
/// command opens itself. A no-op while another connection still reads old pages (the
/// daemon's own checkpoints finish the job then); waits up to 5 s for a writer.
pub fn truncate_wal(db: &Path) -> Result<(), StoreError> {
    let conn = Connection::open(db)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncating_the_wal_folds_it_into_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("callbackd.db");
        let conn = Connection::open(&db).unwrap();
        conn.pragma_update(None, "journal_mode", "wal").unwrap();
        conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        conn.execute_batch("CREATE TABLE t (x BLOB); INSERT INTO t VALUES (zeroblob(100000));")
            .unwrap();
        assert!(sizes(&db).wal > 0);
        truncate_wal(&db).unwrap();
        assert_eq!(sizes(&db).wal, 0);
        let rows: i64 = conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 1);
    }
}
