//! Schema migrations: the numbered SQL files in `migrations/`, embedded at build time and
//! applied in order, each in its own transaction. The version lives in `PRAGMA
//! user_version`. An applied migration is never edited; a change is a new file.

use rusqlite::Connection;

/// `(name, sql)` in order; the schema version after applying `MIGRATIONS[i]` is `i + 1`.
const MIGRATIONS: &[(&str, &str)] = &[
    (
        "0001_init",
        include_str!("../../../migrations/0001_init.sql"),
    ),
    (
        "0002_run_api",
        include_str!("../../../migrations/0002_run_api.sql"),
    ),
    (
        "0003_approvals",
        include_str!("../../../migrations/0003_approvals.sql"),
    ),
    (
        "0004_approval_leases",
        include_str!("../../../migrations/0004_approval_leases.sql"),
    ),
    (
        "0005_run_inputs",
        include_str!("../../../migrations/0005_run_inputs.sql"),
    ),
    (
        "0006_forks",
        include_str!("../../../migrations/0006_forks.sql"),
    ),
    ("0008_see", include_str!("../../../migrations/0008_see.sql")),
];

/// The schema version this build writes.
pub const LATEST_VERSION: u32 = MIGRATIONS.len() as u32;

#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("database schema version {found} is newer than this callbackd supports ({LATEST_VERSION}); upgrade callbackd")]
    TooNew { found: u32 },
    #[error("migration {name} failed")]
    Failed {
        name: &'static str,
        source: rusqlite::Error,
    },
    #[error("reading the schema version failed: {0}")]
    Version(rusqlite::Error),
}

/// Brings the database up to [`LATEST_VERSION`]. Returns the versions before and after.
pub fn migrate(conn: &mut Connection) -> Result<(u32, u32), MigrateError> {
    let before: u32 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(MigrateError::Version)?;
    if before > LATEST_VERSION {
        return Err(MigrateError::TooNew { found: before });
    }
    for (i, (name, sql)) in MIGRATIONS.iter().enumerate().skip(before as usize) {
        let failed = |source| MigrateError::Failed { name, source };
        let tx = conn.transaction().map_err(failed)?;
        tx.execute_batch(sql).map_err(failed)?;
        tx.pragma_update(None, "user_version", i as u32 + 1)
            .map_err(failed)?;
        tx.commit().map_err(failed)?;
    }
    Ok((before, LATEST_VERSION))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrating_twice_is_a_no_op() {
        let mut conn = Connection::open_in_memory().unwrap();
        assert_eq!(migrate(&mut conn).unwrap(), (0, LATEST_VERSION));
        assert_eq!(
            migrate(&mut conn).unwrap(),
            (LATEST_VERSION, LATEST_VERSION)
        );
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", LATEST_VERSION + 1)
            .unwrap();
        assert!(matches!(
            migrate(&mut conn),
            Err(MigrateError::TooNew { .. })
        ));
    }
}
