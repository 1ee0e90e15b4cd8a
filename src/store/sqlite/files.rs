//! The files of a SQLite database: the database file, and the `-wal` and `-shm` files that
//! WAL mode keeps beside it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

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
