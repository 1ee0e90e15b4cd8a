//! Reading a namespace out whole (`callbackd export`) on PostgreSQL: the counterpart of
//! `sqlite::dump::read_all`, with the same records in the same order.
//!
//! The read is one `REPEATABLE READ, READ ONLY` transaction on a connection of its own, so
//! an export of a database that daemons go on writing is one consistent snapshot, and it
//! takes no lock that would hold them up. Rows are streamed, not collected: the store is
//! never held in memory.

use std::pin::pin;

use futures_util::TryStreamExt;
use tokio_postgres::types::ToSql;
use tokio_postgres::{IsolationLevel, NoTls, Row, Transaction};

use super::{migrate, redact_url, PgOptions};
use crate::store::dump::{DumpCounts, DumpSink};
use crate::store::sql::{self, dump::RowError};
use crate::store::StoreError;

/// Why a read-out stopped. Messages carry the URL without its password.
#[derive(Debug, thiserror::Error)]
pub enum ReadError<E> {
    #[error("store.url {url} is not a valid PostgreSQL URL")]
    Url {
        url: String,
        source: tokio_postgres::Error,
    },
    #[error("cannot connect to PostgreSQL at {url} (is the server running and reachable, and are user, password and database right?)")]
    Connect {
        url: String,
        source: tokio_postgres::Error,
    },
    #[error("reading PostgreSQL at {url}")]
    Store {
        url: String,
        source: tokio_postgres::Error,
    },
    #[error("reading PostgreSQL at {url}")]
    Row { url: String, source: StoreError },
    /// A stored document or payload that is not JSON (as the SQLite reader refuses it).
    #[error("PostgreSQL at {url}: {what} is not valid JSON: {detail}")]
    NotJson {
        url: String,
        what: String,
        detail: String,
    },
    #[error(transparent)]
    Sink(E),
}

impl<E> ReadError<E> {
    /// The sink's own error, or the store's (which holds no sink error).
    pub fn split(self) -> Result<ReadError<std::convert::Infallible>, E> {
        Ok(match self {
            ReadError::Sink(e) => return Err(e),
            ReadError::Url { url, source } => ReadError::Url { url, source },
            ReadError::Connect { url, source } => ReadError::Connect { url, source },
            ReadError::Store { url, source } => ReadError::Store { url, source },
            ReadError::Row { url, source } => ReadError::Row { url, source },
            ReadError::NotJson { url, what, detail } => ReadError::NotJson { url, what, detail },
        })
    }
}

/// Reads every agent, run, event and checkpoint blob of namespace `ns` of the store `opts`
/// names (its schema, or the server's default) into `sink`, from one snapshot, in the
/// order of [`sql::dump`] (ids compare bytewise: the key columns are `COLLATE "C"`).
/// Changes nothing, migrations included.
pub async fn read_all<S: DumpSink>(
    opts: &PgOptions,
    ns: &str,
    sink: &mut S,
) -> Result<DumpCounts, ReadError<S::Error>> {
    let url = redact_url(opts.url.expose());
    let mut cfg: tokio_postgres::Config =
        opts.url.expose().parse().map_err(|source| ReadError::Url {
            url: url.clone(),
            source,
        })?;
    cfg.connect_timeout(opts.connect_timeout);
    if cfg.get_application_name().is_none() {
        cfg.application_name("callbackd export");
    }
    let (mut client, connection) =
        cfg.connect(NoTls)
            .await
            .map_err(|source| ReadError::Connect {
                url: url.clone(),
                source,
            })?;
    let connection = tokio::spawn(connection);
    let result = read_snapshot(&mut client, opts, ns, sink, &url).await;
    drop(client);
    // The connection ends once the client is gone; a failure there changes nothing read.
    let _ = connection.await;
    result
}

async fn read_snapshot<S: DumpSink>(
    client: &mut tokio_postgres::Client,
    opts: &PgOptions,
    ns: &str,
    sink: &mut S,
    url: &str,
) -> Result<DumpCounts, ReadError<S::Error>> {
    let fail = |source| ReadError::Store {
        url: url.to_string(),
        source,
    };
    let tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(fail)?;
    // The daemon's statement_timeout is for one call; a read-out of a large namespace is
    // one statement per table, streamed as fast as the files take it. `SET LOCAL` ends
    // with the transaction.
    let mut setup = "SET LOCAL statement_timeout = 0".to_string();
    if let Some(schema) = &opts.schema {
        setup.push_str(&format!(
            "; SET LOCAL search_path TO {}",
            migrate::quote_ident(schema)
        ));
    }
    tx.batch_execute(&setup).await.map_err(fail)?;

    let mut counts = DumpCounts::default();
    for read in sql::dump::Read::ALL {
        let mut rows = pin!(query(&tx, read.sql().postgres, ns).await.map_err(fail)?);
        while let Some(r) = rows.try_next().await.map_err(fail)? {
            sql::dump::hand_on(read, &r, sink, &mut counts).map_err(|e| match e {
                RowError::Sink(e) => ReadError::Sink(e),
                RowError::NotJson { what, error, .. } => ReadError::NotJson {
                    url: url.to_string(),
                    what,
                    detail: error.to_string(),
                },
                RowError::Row(source) => ReadError::Row {
                    url: url.to_string(),
                    source,
                },
            })?;
        }
    }

    tx.commit().await.map_err(fail)?;
    Ok(counts)
}

/// The rows of `sql` (one `$1`, the namespace), as they arrive.
async fn query(
    tx: &Transaction<'_>,
    sql: &str,
    ns: &str,
) -> Result<
    impl futures_util::Stream<Item = Result<Row, tokio_postgres::Error>>,
    tokio_postgres::Error,
> {
    tx.query_raw(sql, [&ns as &(dyn ToSql + Sync)]).await
}
