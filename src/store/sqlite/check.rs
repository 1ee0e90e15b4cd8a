//! `callbackd check`: an offline verification of a database file: SQLite's own
//! `PRAGMA integrity_check`, and every checkpoint blob against the checksum taken when it
//! was written (the bridge never checks the bytes it reads back).

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

pub use crate::store::check::CheckReport;
use crate::store::sql;

/// Checks the database at `path`, read-only. Safe to run while the daemon is serving (WAL
/// readers see the last committed state).
pub fn check(path: &Path) -> rusqlite::Result<CheckReport> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    let mut report = CheckReport {
        schema_version: conn.query_row("PRAGMA user_version", [], |r| r.get(0))?,
        ..Default::default()
    };
    {
        let mut stmt = conn.prepare("PRAGMA integrity_check")?;
        let lines = stmt.query_map([], |r| r.get::<_, String>(0))?;
        for line in lines {
            let line = line?;
            if line != "ok" {
                report.integrity_errors.push(line);
            }
        }
    }
    if report.schema_version == 0 {
        return Ok(report);
    }
    let mut stmt = conn.prepare(sql::checkpoints::EVERY_BLOB)?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        let data = row.get_ref(3)?.as_blob()?;
        report.blob(data, row.get(4)?, || {
            Ok::<_, rusqlite::Error>((row.get(0)?, row.get(1)?, row.get(2)?))
        })?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::{SqliteOptions, SqliteStore};
    use crate::store::{Namespace, Store, StoreCall};

    #[tokio::test]
    async fn check_finds_a_flipped_byte_and_names_the_blob() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let store = SqliteStore::open(&SqliteOptions::new(&path)).unwrap();
        for blob in ["good", "bad"] {
            let call = StoreCall::parse(
                "checkpoints",
                "create",
                &format!(r#"{{"agentId":"a","blobId":"{blob}","data":"AAECAw=="}}"#),
            )
            .unwrap();
            store.call(&Namespace::default(), call).await.unwrap();
        }
        assert!(check(&path).unwrap().is_ok());
        Connection::open(&path)
            .unwrap()
            .execute(
                "UPDATE checkpoints SET data = X'00010204' WHERE blob_id = 'bad'",
                [],
            )
            .unwrap();
        let report = check(&path).unwrap();
        assert_eq!(report.blobs_checked, 2);
        assert!(report.integrity_errors.is_empty());
        assert_eq!(
            report.corrupt_blobs,
            [("default".into(), "a".into(), "bad".into())]
        );
    }
}
