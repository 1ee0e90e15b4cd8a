//! [`PgStore`]: the store on a PostgreSQL database, which several daemons (on several
//! hosts) can share. Same calls, same answers, byte for byte, as the SQLite backend: the
//! output shapes are the shared ones of `store/`, and tests/api runs against both.
//!
//! Every call runs on the store's own small runtime, where the pool's connections live
//! (see [`PgStore::connect`]). A write is one transaction, acknowledged only after its commit;
//! a serialization failure or deadlock is rolled back and run again, up to
//! [`MAX_ATTEMPTS`] times, and never answered as `internal`.

mod append;
mod approvals;
mod check;
mod db;
pub mod dump;
mod error;
mod group;
mod listen;
pub mod migrate;
mod records;
pub mod transfer;

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio::sync::broadcast;
use tokio_postgres::NoTls;

use super::sql;
use super::{
    BoxFuture, Listener, Namespace, Notices, Store, StoreCall, StoreError, StoreNotice, StoreOutput,
};
use crate::secret::Secret;
use db::Db;
use error::Fail;

/// How often a call that hit a serialization failure or deadlock is tried in all.
pub const MAX_ATTEMPTS: u32 = 8;

/// How to open a [`PgStore`].
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// `postgres://user:password@host:port/database?...` (libpq URL or key=value form).
    pub url: Secret,
    /// The schema the tables live in (created if missing); `None`: the server's default
    /// (`public`, normally).
    pub schema: Option<String>,
    pub pool_size: usize,
    pub connect_timeout: Duration,
    /// Server-side limit of one statement; zero: none.
    pub statement_timeout: Duration,
    /// Off for transaction-mode poolers (see `db`).
    pub prepared_statements: bool,
    pub max_page_size: usize,
}

impl PgOptions {
    pub fn new(url: impl Into<String>) -> Self {
        PgOptions {
            url: Secret::new(url.into()),
            schema: None,
            pool_size: 16,
            connect_timeout: Duration::from_secs(5),
            statement_timeout: Duration::from_secs(30),
            prepared_statements: true,
            max_page_size: 1000,
        }
    }
}

/// Why the store could not be opened. Messages carry the URL without its password.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("store.url {url} is not a valid PostgreSQL URL: {source}")]
    Url {
        url: String,
        source: tokio_postgres::Error,
    },
    #[error("cannot connect to PostgreSQL at {url} (is the server running and reachable, and are user, password and database right?)")]
    Connect {
        url: String,
        source: deadpool_postgres::PoolError,
    },
    #[error("cannot set up the PostgreSQL connection pool for {url}: {detail}")]
    Pool { url: String, detail: String },
    #[error("PostgreSQL at {url}")]
    Migrate {
        url: String,
        source: migrate::MigrateError,
    },
    #[error("cannot start the PostgreSQL store's threads")]
    Runtime(#[source] std::io::Error),
    #[error("PostgreSQL at {url}: the listening connection (LISTEN {channel}) failed", channel = listen::CHANNEL)]
    Listen {
        url: String,
        source: tokio_postgres::Error,
    },
    #[error("PostgreSQL at {url}: reading the current schema failed")]
    Schema {
        url: String,
        source: tokio_postgres::Error,
    },
}

/// The PostgreSQL store. Cheap to share behind an `Arc`.
pub struct PgStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    /// This daemon's id in notifications (its own are not heard back) and in the shared
    /// tables (the owner of its tool call records).
    instance: String,
    /// Stops the listener when the store goes.
    listener: Option<tokio::task::JoinHandle<()>>,
    prepared: bool,
    /// The runtime every database task runs on.
    handle: tokio::runtime::Handle,
    /// That runtime, owned by the store (shut down in the background when it goes).
    runtime: Option<tokio::runtime::Runtime>,
    events: Arc<Notices>,
    max_page_size: usize,
    schema: String,
    /// Appends waiting to be grouped into a shared transaction.
    appends: group::Queue,
}

impl PgStore {
    /// Connects, creates the schema if needed and applies the missing migrations. Must be
    /// called on the runtime that will run the store (the daemon's main runtime).
    pub async fn open(opts: &PgOptions) -> Result<PgStore, OpenError> {
        Self::connect(opts, true).await
    }

    /// [`open`](Self::open), optionally without migrating (`callbackd check` changes
    /// nothing).
    ///
    /// The store gets a small runtime of its own: the pool's connections, the listener and
    /// every call run there, so neither the connection threads' runtimes (which come and
    /// go) nor a plugin tool that blocks a worker of the main runtime can stall them.
    pub async fn connect(opts: &PgOptions, migrate: bool) -> Result<PgStore, OpenError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("callbackd-pg")
            .enable_all()
            .build()
            .map_err(OpenError::Runtime)?;
        let opts = opts.clone();
        let opened = runtime
            .spawn(async move { Self::open_here(&opts, migrate).await })
            .await
            .map_err(|e| OpenError::Runtime(std::io::Error::other(e.to_string())))
            .and_then(|r| r);
        let mut inner = match opened {
            Ok(inner) => inner,
            Err(e) => {
                // Dropped here, inside the caller's runtime, it would block and panic.
                runtime.shutdown_background();
                return Err(e);
            }
        };
        inner.runtime = Some(runtime);
        Ok(PgStore {
            inner: Arc::new(inner),
        })
    }

    /// Opens on the current runtime, which becomes the store's.
    async fn open_here(opts: &PgOptions, migrate: bool) -> Result<Inner, OpenError> {
        let url = redact_url(opts.url.expose());
        let mut cfg: tokio_postgres::Config =
            opts.url.expose().parse().map_err(|source| OpenError::Url {
                url: url.clone(),
                source,
            })?;
        cfg.connect_timeout(opts.connect_timeout);
        if cfg.get_application_name().is_none() {
            cfg.application_name("callbackd");
        }
        let mut options = cfg.get_options().unwrap_or_default().to_string();
        if !opts.statement_timeout.is_zero() {
            options.push_str(&format!(
                " -c statement_timeout={}",
                opts.statement_timeout.as_millis()
            ));
        }
        if let Some(schema) = &opts.schema {
            options.push_str(&format!(" -c search_path={schema}"));
        }
        if !options.trim().is_empty() {
            cfg.options(options.trim());
        }
        let listen_cfg = cfg.clone();
        let manager = Manager::from_config(
            cfg,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(opts.pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(opts.connect_timeout))
            .create_timeout(Some(opts.connect_timeout))
            .recycle_timeout(Some(opts.connect_timeout))
            .build()
            .map_err(|e| OpenError::Pool {
                url: url.clone(),
                detail: e.to_string(),
            })?;
        let mut client = pool.get().await.map_err(|source| OpenError::Connect {
            url: url.clone(),
            source,
        })?;
        let schema = match &opts.schema {
            Some(s) => s.clone(),
            None => client
                .query_one("SELECT current_schema()", &[])
                .await
                .map_err(|source| OpenError::Schema {
                    url: url.clone(),
                    source,
                })?
                .get::<_, Option<String>>(0)
                .unwrap_or_else(|| "public".into()),
        };
        if migrate {
            migrate::migrate(&mut client, &schema)
                .await
                .map_err(|source| OpenError::Migrate {
                    url: url.clone(),
                    source,
                })?;
        }
        drop(client);
        let events = Arc::new(Notices::new(1024));
        let instance = crate::secret::Secret::generate()
            .map(|s| s.expose()[..16].to_string())
            .unwrap_or_else(|_| format!("{}-{:?}", std::process::id(), std::time::Instant::now()));
        let listener = if migrate {
            let (ready, is_ready) = tokio::sync::oneshot::channel();
            let task = tokio::spawn(listen::run(
                listen_cfg,
                instance.clone(),
                schema.clone(),
                events.clone(),
                ready,
            ));
            match is_ready.await {
                Ok(Ok(())) => Some(task),
                Ok(Err(source)) => return Err(OpenError::Listen { url, source }),
                Err(_) => None,
            }
        } else {
            None
        };
        Ok(Inner {
            pool,
            instance,
            listener,
            prepared: opts.prepared_statements,
            handle: tokio::runtime::Handle::current(),
            runtime: None,
            events,
            max_page_size: opts.max_page_size.max(1),
            schema,
            appends: group::Queue::new(),
        })
    }

    /// Runs `f` in a transaction of its own on the store's runtime, retried on conflicts.
    fn run_tx<T, F>(&self, f: F) -> BoxFuture<'_, Result<T, StoreError>>
    where
        T: Send + 'static,
        F: for<'c> Fn(Db<'c>) -> BoxFuture<'c, Result<T, Fail>> + Send + Sync + 'static,
    {
        let inner = self.inner.clone();
        self.spawn(async move {
            inner
                .retrying(|| async {
                    let mut client = inner.pool.get().await?;
                    let tx = client.transaction().await?;
                    let out = f(Db::tx(&tx, inner.prepared)).await?;
                    tx.commit().await?;
                    Ok(out)
                })
                .await
        })
    }

    /// Runs `f` on a pooled connection (no transaction) on the store's runtime.
    fn run_read<T, F>(&self, f: F) -> BoxFuture<'_, Result<T, StoreError>>
    where
        T: Send + 'static,
        F: for<'c> Fn(Db<'c>) -> BoxFuture<'c, Result<T, Fail>> + Send + Sync + 'static,
    {
        let inner = self.inner.clone();
        self.spawn(async move {
            inner
                .retrying(|| async {
                    let client = inner.pool.get().await?;
                    f(Db::client(&client, inner.prepared)).await
                })
                .await
        })
    }

    /// The backend's announcer (and the outbox's composer it keeps).
    pub(crate) fn notices(&self) -> &Notices {
        &self.inner.events
    }

    /// Runs a shared SQL operation ([`sql`]) in a transaction of its own, retried on
    /// conflicts.
    pub(crate) fn sql_write<T, F>(&self, f: F) -> BoxFuture<'_, Result<T, StoreError>>
    where
        T: Send + 'static,
        F: for<'d, 'c> Fn(&'d Db<'c>) -> BoxFuture<'d, Result<T, Fail>> + Send + Sync + 'static,
    {
        let f = Arc::new(f);
        self.run_tx(move |db| {
            let f = f.clone();
            Box::pin(async move { f(&db).await })
        })
    }

    /// Runs a shared SQL operation on a pooled connection.
    pub(crate) fn sql_read<T, F>(&self, f: F) -> BoxFuture<'_, Result<T, StoreError>>
    where
        T: Send + 'static,
        F: for<'d, 'c> Fn(&'d Db<'c>) -> BoxFuture<'d, Result<T, Fail>> + Send + Sync + 'static,
    {
        let f = Arc::new(f);
        self.run_read(move |db| {
            let f = f.clone();
            Box::pin(async move { f(&db).await })
        })
    }

    fn spawn<T: Send + 'static>(
        &self,
        fut: impl std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
    ) -> BoxFuture<'_, Result<T, StoreError>> {
        let task = self.inner.handle.spawn(fut);
        Box::pin(async move {
            task.await
                .map_err(|e| StoreError::Internal(format!("store task failed: {e}")))?
        })
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(listener) = self.listener.take() {
            listener.abort();
        }
        if let Some(runtime) = self.runtime.take() {
            // May run inside another runtime's task, where a blocking shutdown panics.
            runtime.shutdown_background();
        }
    }
}

impl Inner {
    /// Runs `attempt` until it succeeds, fails for good, or [`MAX_ATTEMPTS`] conflicts.
    async fn retrying<T, Fut>(&self, attempt: impl Fn() -> Fut) -> Result<T, StoreError>
    where
        Fut: std::future::Future<Output = Result<T, Fail>>,
    {
        let mut tries = 0;
        loop {
            tries += 1;
            match attempt().await {
                Ok(v) => return Ok(v),
                Err(e) if tries < MAX_ATTEMPTS && (e.is_conflict() || e.is_key_race()) => {
                    tracing::debug!(tries, error = ?e, "store transaction conflicted; running it again");
                    // 1, 2, 4, ... ms, plus jitter, so that the parties of a deadlock do
                    // not collide again in step.
                    let jitter = u64::from(std::process::id() ^ tries) % 3;
                    tokio::time::sleep(Duration::from_millis((1 << tries.min(6)) + jitter)).await;
                }
                Err(e) => return Err(e.into_store_error()),
            }
        }
    }

    async fn call_once(
        &self,
        ns: &Namespace,
        call: &StoreCall,
    ) -> Result<(StoreOutput, Option<StoreNotice>), Fail> {
        if !call.is_write() {
            let client = self.pool.get().await?;
            let db = Db::client(&client, self.prepared);
            return Ok((sql::call::read(&db, ns.as_str(), call).await?, None));
        }
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let db = Db::tx(&tx, self.prepared);
        let (output, notice) = sql::call::write(&db, ns, call, self.events.outbox()).await?;
        if let Some(StoreNotice::Appended(notice)) = &notice {
            // Once per appending transaction, ids only; delivered at commit.
            let payload = listen::payload(&self.instance, &self.schema, notice);
            db.execute(
                "SELECT pg_notify($1, $2)",
                &[
                    (&listen::CHANNEL, tokio_postgres::types::Type::TEXT),
                    (&payload, tokio_postgres::types::Type::TEXT),
                ],
            )
            .await?;
        }
        tx.commit().await?;
        Ok((output, notice))
    }
}

impl Store for PgStore {
    fn call(
        &self,
        ns: &Namespace,
        call: StoreCall,
    ) -> BoxFuture<'_, Result<StoreOutput, StoreError>> {
        let ns = ns.clone();
        let call = call.clamp(self.inner.max_page_size);
        let inner = self.inner.clone();
        self.spawn(async move {
            let (output, notice) = match call {
                // One statement, grouped with concurrent appends (see `group`).
                StoreCall::EventsAppend(ev) => {
                    let (output, appended) = inner.append(ns, ev).await?;
                    (output, appended.map(StoreNotice::Appended))
                }
                call => inner.retrying(|| inner.call_once(&ns, &call)).await?,
            };
            if let Some(notice) = notice {
                inner.events.send(notice);
            }
            Ok(output)
        })
    }

    fn subscribe(&self) -> broadcast::Receiver<StoreNotice> {
        self.inner.events.subscribe()
    }

    fn listen(&self, listener: Listener) {
        self.inner.events.listen(listener);
    }

    crate::store::record_stores!();
}

pub use crate::secret::redact_url;

sql::memory::impl_tool_data!(PgStore);
