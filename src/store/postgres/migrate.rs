//! Versioned schema migrations for PostgreSQL: the numbered SQL files in
//! `migrations/postgres/`, embedded at build time. Every daemon applies what is missing when
//! it starts, all pending migrations in one transaction that first takes an advisory lock
//! (per schema): two daemons starting at once apply them once, the second waits, then finds
//! them applied. An applied migration is never edited; a change is a new file.

use deadpool_postgres::ClientWrapper;
use tokio_postgres::error::SqlState;

/// `(name, sql)` in order; the schema version after applying `MIGRATIONS[i]` is `i + 1`.
const MIGRATIONS: &[(&str, &str)] = &[
    (
        "0001_init",
        include_str!("../../../migrations/postgres/0001_init.sql"),
    ),
    (
        "0002_run_api",
        include_str!("../../../migrations/postgres/0002_run_api.sql"),
    ),
    (
        "0003_approvals",
        include_str!("../../../migrations/postgres/0003_approvals.sql"),
    ),
    (
        "0004_approval_leases",
        include_str!("../../../migrations/postgres/0004_approval_leases.sql"),
    ),
    (
        "0005_run_inputs",
        include_str!("../../../migrations/postgres/0005_run_inputs.sql"),
    ),
    (
        "0006_forks",
        include_str!("../../../migrations/postgres/0006_forks.sql"),
    ),
    (
        "0008_see",
        include_str!("../../../migrations/postgres/0008_see.sql"),
    ),
];

/// The schema version this build writes.
pub const LATEST_VERSION: u32 = MIGRATIONS.len() as u32;

/// The advisory lock class of migrations (the key is a hash of the schema name).
const MIGRATE_LOCK: i32 = 0x6362_6d00;

#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("database schema version {found} is newer than this callbackd supports ({LATEST_VERSION}); upgrade callbackd")]
    TooNew { found: u32 },
    #[error(
        "the database user may not create tables in schema {schema:?}; grant it CREATE on the \
         schema (GRANT CREATE ON SCHEMA {schema} TO <user>) or run `callbackd migrate` once as \
         its owner"
    )]
    Permission {
        schema: String,
        source: tokio_postgres::Error,
    },
    #[error("migration {name} failed")]
    Failed {
        name: &'static str,
        source: tokio_postgres::Error,
    },
    #[error("reading the schema version failed")]
    Version(#[source] tokio_postgres::Error),
}

/// Brings `schema` (created if missing) up to [`LATEST_VERSION`]; returns the versions
/// before and after.
pub async fn migrate(client: &mut ClientWrapper, schema: &str) -> Result<(u32, u32), MigrateError> {
    let denied = |e: tokio_postgres::Error| {
        if e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) {
            MigrateError::Permission {
                schema: schema.to_string(),
                source: e,
            }
        } else {
            MigrateError::Version(e)
        }
    };
    let tx = client.transaction().await.map_err(MigrateError::Version)?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1, hashtext($2))",
        &[&MIGRATE_LOCK, &schema],
    )
    .await
    .map_err(MigrateError::Version)?;
    let ident = quote_ident(schema);
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS {ident}; \
         CREATE TABLE IF NOT EXISTS {ident}.callbackd_migrations (\
             version integer PRIMARY KEY, name text NOT NULL, \
             applied_at timestamptz NOT NULL DEFAULT now())"
    ))
    .await
    .map_err(denied)?;
    let before: i32 = tx
        .query_one(
            &format!("SELECT COALESCE(max(version), 0) FROM {ident}.callbackd_migrations"),
            &[],
        )
        .await
        .map_err(MigrateError::Version)?
        .get(0);
    let before = u32::try_from(before).unwrap_or(0);
    if before > LATEST_VERSION {
        return Err(MigrateError::TooNew { found: before });
    }
    for (i, (name, sql)) in MIGRATIONS.iter().enumerate().skip(before as usize) {
        let failed = |source: tokio_postgres::Error| {
            if source.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) {
                MigrateError::Permission {
                    schema: schema.to_string(),
                    source,
                }
            } else {
                MigrateError::Failed { name, source }
            }
        };
        tx.batch_execute(&format!("SET LOCAL search_path TO {ident}; {sql}"))
            .await
            .map_err(failed)?;
        tx.execute(
            &format!("INSERT INTO {ident}.callbackd_migrations (version, name) VALUES ($1, $2)"),
            &[&(i as i32 + 1), name],
        )
        .await
        .map_err(failed)?;
    }
    tx.commit().await.map_err(MigrateError::Version)?;
    Ok((before, LATEST_VERSION))
}

/// The schema version of `schema`, 0 when nothing was ever applied.
pub async fn version(client: &ClientWrapper, schema: &str) -> Result<u32, tokio_postgres::Error> {
    let exists: bool = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'callbackd_migrations')",
            &[&schema],
        )
        .await?
        .get(0);
    if !exists {
        return Ok(0);
    }
    let v: i32 = client
        .query_one(
            &format!(
                "SELECT COALESCE(max(version), 0) FROM {}.callbackd_migrations",
                quote_ident(schema)
            ),
            &[],
        )
        .await?
        .get(0);
    Ok(u32::try_from(v).unwrap_or(0))
}

/// `"name"`, with any `"` doubled.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
