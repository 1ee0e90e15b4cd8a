//! [`App`]: the daemon assembled from a [`Config`]: listener bound, store opened and
//! migrated, tokens resolved, router built. `main` runs it until a signal; tests run it
//! until they drop a oneshot.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::api::{ApiState, ApiTokens};
use crate::auth::TokenSet;
use crate::bridge::{BridgeArgs, Bridges};
use crate::config::Config;
use crate::connect::UnaryLimits;
use crate::metrics::{Metrics, StoreSizes};
use crate::namespaces::quota::QuotaGate;
use crate::namespaces::{Namespaces, Table, TokenRole};
use crate::rpc::RpcState;
use reload::{ReloadSource, Reloader};

pub mod reload;
mod router;
mod run_ends;
use crate::server::{self, ServerLimits};
use crate::store::Namespace;
use crate::store::{RunRecords, Store};
use crate::tokens::{self, Tokens};
use crate::tool_calls::ToolCalls;
use crate::tools::builtin::builtins;
use crate::tools::service::ToolService;
use crate::tools::{Tool, ToolRegistry};

/// The reason a held call cancelled by a stop of callbackd records.
pub const STOPPING: &str = "callbackd is stopping";

/// A built daemon, listening but not yet serving.
pub struct App {
    listener: TcpListener,
    addr: SocketAddr,
    router: axum::Router,
    store: Arc<dyn Store>,
    tools: ToolService,
    tokens: Tokens,
    limits: ServerLimits,
    api: ApiState,
    retention: Option<(Duration, Duration, usize)>,
    /// `[bridge]` defaults for a bridge attached later (model, API key).
    bridge_defaults: (String, String),
    /// The SQLite file; on PostgreSQL only the anchor of the data directory (tokens and
    /// runtime files sit beside it), which is why the ready line also names the store.
    db: std::path::PathBuf,
    /// The store as a person names it (the file, or the PostgreSQL URL without its password).
    store_desc: String,
    namespaces: Namespaces,
    reloader: Reloader,
    /// Whether `[[namespaces]]` is configured (the usage gauges are fed only then).
    namespaced: bool,
    quotas: QuotaGate,
    /// The trace export (`[telemetry]`), flushed at the stop.
    traces: Option<crate::telemetry::Traces>,
    /// The listeners of the store's run ends, alive as long as the daemon.
    _run_ends: Arc<run_ends::RunEnds>,
    /// `[[webhooks]]`: its delivery worker runs while the daemon serves.
    webhooks: Option<crate::webhooks::Webhooks>,
    /// The runs of the bridge `callbackd run` supervises, once it claims them.
    bridge_runs: crate::bridge::BridgeRuns,
}

/// Builds an [`App`]: the configuration, plus the plugin tools a user's own `main` adds.
pub struct AppBuilder {
    config: Config,
    tools: Vec<Arc<dyn Tool>>,
    reload: Option<ReloadSource>,
}

impl App {
    /// Starts building a daemon from a validated configuration.
    pub fn builder(config: Config) -> AppBuilder {
        AppBuilder {
            config,
            tools: Vec::new(),
            reload: None,
        }
    }

    /// Builds with no extra tools.
    pub async fn build(config: Config) -> anyhow::Result<App> {
        App::builder(config).build().await
    }

    /// The address actually bound (port 0 resolved).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL the bridge's `--store-callback-url` / `--tool-callback-url` take.
    pub fn base_url(&self) -> String {
        base_url(self.addr)
    }

    /// The default namespace's tokens (as resolved at startup).
    pub fn tokens(&self) -> &Tokens {
        &self.tokens
    }

    /// The namespaces in force.
    pub fn namespaces(&self) -> &Namespaces {
        &self.namespaces
    }

    /// Reloads namespaces and tokens (what SIGHUP does; tests call it directly).
    pub fn reloader(&self) -> Reloader {
        self.reloader.clone()
    }

    /// The flags that point a bridge at namespace `ns` of this daemon.
    pub fn bridge_args(&self, ns: &Namespace) -> anyhow::Result<BridgeArgs> {
        let table = self.namespaces.table();
        let token = |role| {
            table.token_of(ns, role).cloned().with_context(|| {
                format!(
                    "namespace {:?} is not configured ([[namespaces]])",
                    ns.as_str()
                )
            })
        };
        Ok(BridgeArgs {
            url: self.base_url(),
            store_token: token(TokenRole::Store)?,
            tool_token: token(TokenRole::Tool)?,
        })
    }

    pub fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// The run API's state (the bridge slot `callbackd run` attaches its bridge through).
    pub fn api(&self) -> &ApiState {
        &self.api
    }

    /// The model and API key new sessions get on a bridge attached later (`callbackd run`).
    pub fn bridge_defaults(&self) -> (String, String) {
        self.bridge_defaults.clone()
    }

    /// The `callbackd ready {json}` line's JSON: where the daemon listens, the run API and
    /// the console (its URL carries the API token in the fragment, which browsers never
    /// send to a server; the console keeps it in sessionStorage).
    pub fn ready_json(&self) -> serde_json::Value {
        self.ready_json_for(&Namespace::default())
    }

    /// [`ready_json`](Self::ready_json) for the bridge of namespace `ns` (`callbackd run
    /// --namespace`): its console URL carries that namespace's API token (none without one).
    pub fn ready_json_for(&self, ns: &Namespace) -> serde_json::Value {
        let table = self.namespaces.table();
        let console = table
            .token_of(ns, TokenRole::Api)
            .map(|t| format!("{}ui/#token={}", self.base_url(), t.expose()));
        let mut ready = serde_json::json!({
            "url": self.base_url(),
            "api_url": self.api_url(),
            "console_url": console,
            "pid": std::process::id(),
            "db": self.db,
            "store": self.store_desc,
        });
        if *ns != Namespace::default() {
            ready["namespace"] = ns.as_str().into();
        }
        ready
    }

    /// From now on the runs namespace `ns`'s bridge starts are this daemon's: `callbackd
    /// run`, whose bridge is its child, ends them when the bridge exits
    /// ([`end_bridge_runs`](Self::end_bridge_runs)), and a daemon started after a crash
    /// ends those left (`bridge::runs_file`).
    pub fn claim_bridge_runs(&self, ns: &Namespace) -> crate::bridge::BridgeRuns {
        self.bridge_runs.claim(&data_dir(&self.db), ns);
        self.bridge_runs.clone()
    }

    /// The run API's base URL.
    pub fn api_url(&self) -> String {
        format!("{}v1", self.base_url())
    }

    /// Serves until `shutdown` resolves, then drains in-flight calls and returns. Custom
    /// tool calls, the run API's follow hub and retention run on the runtime this is called
    /// on (see `tools::service::ToolService`); connections on the connection threads.
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        self.tools.run_on(tokio::runtime::Handle::current());
        self.api.start();
        let reload = tokio::spawn(self.reloader.clone().watch());
        let quotas = tokio::spawn(self.quotas.clone().refresh_forever());
        // The usage gauges scan every row: only for a daemon that has namespaces to tell apart.
        let usage = self.namespaced.then(|| {
            tokio::spawn(crate::namespaces::usage::feed_metrics(
                self.api.records().clone(),
                self.api.metrics().clone(),
            ))
        });
        let retention = self.retention.map(|(age, interval, batch)| {
            crate::api::retention::spawn_periodic(
                self.api.records().clone(),
                age,
                interval,
                batch,
                self.api.metrics().clone(),
            )
        });
        let sweeper = self.api.approvals().spawn_sweeper();
        let webhooks = self.webhooks.as_ref().map(|w| w.start());
        let api = self.api.clone();
        let shutdown = async move {
            shutdown.await;
            // Held calls first: the bridge gets their answers (cancelled, never run) and
            // can stop, and the record says why before anything else goes. Under `callbackd
            // run` this already happened before the bridge was told to stop.
            api.begin_stop(STOPPING).await;
            // Open streams end with `reconnect` now instead of holding the drain period.
            api.close_streams();
        };
        server::serve(self.listener, self.router, self.limits, shutdown).await;
        // The spans of runs that ended just before the stop, if the collector takes them soon.
        if let Some(traces) = &self.traces {
            traces.flush(Duration::from_secs(3)).await;
        }
        sweeper.abort();
        // An attempt cut short here is claimed again after its lease: at least once.
        if let Some(task) = webhooks {
            task.abort();
        }
        if let Some(task) = retention {
            task.abort();
        }
        reload.abort();
        quotas.abort();
        if let Some(usage) = usage {
            usage.abort();
        }
        Ok(())
    }
}

impl AppBuilder {
    /// Adds a plugin tool, served next to the built-in and `[[tools.command]]` tools. A
    /// name used twice fails [`build`](Self::build); `tools.disabled` can switch it off.
    pub fn tool(mut self, tool: impl Tool) -> Self {
        self.tools.push(Arc::new(tool));
        self
    }

    /// [`tool`](Self::tool) for a tool that is already shared.
    pub fn tool_arc(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Reloads namespaces and tokens from `source` on SIGHUP and when its file (or a token
    /// file) changes (`callbackd serve` and `run` set it; without it nothing reloads).
    pub fn reload_from(mut self, source: ReloadSource) -> Self {
        self.reload = Some(source);
        self
    }

    /// What `callbackd tools export` prints, for this builder's tools: the JSON an adapter
    /// puts in CreateAgent `options.local.customTools` (name -> description, inputSchema,
    /// outputSchema), for every enabled tool. Opens nothing: no store, no listener.
    pub fn tool_declarations(&self) -> anyhow::Result<serde_json::Value> {
        let registry = ToolRegistry::from_config(&self.config.tools, builtins(None), &self.tools)
            .context("invalid tool configuration")?;
        Ok(registry.declarations())
    }

    pub async fn build(self) -> anyhow::Result<App> {
        let config = self.config;
        config.validate()?;
        // The port first: a daemon that cannot listen fails before it creates any file (the
        // database, a generated tokens file).
        let addr = config.server.listen_addr()?;
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        let addr = listener.local_addr()?;
        let db = &config.store.path;
        crate::data_dir::create_private(db).with_context(|| {
            format!(
                "cannot create the database's directory for {}",
                db.display()
            )
        })?;
        match config.store.backend() {
            crate::store::backend::BackendOptions::Sqlite(_) => {
                tracing::info!(path = %db.display(), "database")
            }
            // `path` is then only where the tokens and runtime files go.
            other => tracing::info!(store = %other.describe(), "database"),
        }
        let tokens = tokens::resolve(&config.auth, &config.api, db)?;
        let table = Table::build(&config, &tokens, &|k| std::env::var(k).ok())?;
        let webhook_keys = config.webhook_keys()?;
        let store = config.store.backend().open().await?;
        let metrics = metrics_for(&config, &tokens, store.as_ref())?;
        // Before anything writes (the sweep below cancels approvals): from here on every
        // write that a webhook tells records its deliveries in its own transaction.
        let webhooks = crate::webhooks::Webhooks::attach(
            &config.webhooks,
            webhook_keys,
            Some(&format!("http://{addr}")),
            &store,
            config.retention.max_age()?,
            metrics.clone(),
        );
        let records: Arc<dyn RunRecords> = store.clone().run_records();
        let approval_records = store.clone().approval_records();
        // A held call cannot outlive the daemon it waited in: approvals whose daemon is
        // gone (its lease ran out) are cancelled; those of live daemons sharing the database
        // stay theirs.
        let approvals = crate::approvals::Approvals::with_store(
            approval_records,
            Some(store.clone()),
            std::time::Duration::from_millis(config.tools.approval_poll_ms),
        );
        // A run's end, announced by the store, is told from here on (before the stale
        // runs below are ended, so that their ends are told too).
        let traces = start_traces(&config, &store, &records, &metrics)?;
        let bridge_runs = crate::bridge::BridgeRuns::default();
        let run_ends = run_ends::RunEnds {
            approvals: approvals.clone(),
            traces: traces.clone(),
            metrics: metrics.clone(),
            bridge_runs: bridge_runs.clone(),
            runtime: tokio::runtime::Handle::current(),
        }
        .listen(store.as_ref());
        match approvals.sweep().await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(
                approvals = n,
                "pending approvals of a daemon that stopped were cancelled"
            ),
            Err(e) => tracing::warn!(error = %e, "cannot cancel stale approvals"),
        }
        match records.interrupt_running_tool_calls().await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(calls = n, "tool calls that were running when callbackd last stopped are recorded as interrupted"),
            Err(e) => tracing::warn!(error = %e, "cannot mark interrupted tool calls"),
        }
        // Runs whose supervised bridge is gone with the daemon that ran it (kill -9, a
        // crash): no bridge will finish them; live daemons' runs stay theirs.
        crate::bridge::RunEnder {
            store: store.clone(),
            records: records.clone(),
            approvals: approvals.clone(),
        }
        .end_stale(&data_dir(db))
        .await;
        let registry =
            ToolRegistry::from_config(&config.tools, builtins(Some(store.clone())), &self.tools)
                .context("invalid tool configuration")?;
        tracing::info!(
            tools = %registry.names().collect::<Vec<_>>().join(","),
            "custom tools registered"
        );
        let registry = Arc::new(registry);
        let serves = {
            let registry = registry.clone();
            Arc::new(move |name: &str| registry.get(name).is_some())
        };
        table.check_tools(&*serves)?;
        let bridges = Bridges::default();
        bridges
            .configure(&table)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        if config.namespaces.iter().any(|n| n.name != "default") {
            tracing::info!(namespaces = %table.names().iter().map(|n| n.as_str()).collect::<Vec<_>>().join(","), "namespaces");
        }
        let namespaces = Namespaces::new(table);
        let s = &config.server;
        {
            let approvals = approvals.clone();
            metrics.count_held(move || approvals.held_per_namespace());
        }
        let tools = ToolService::new(registry);
        let quotas = QuotaGate::new(namespaces.clone(), records.clone(), metrics.clone());
        let state = RpcState {
            store: store.clone(),
            tool_calls: ToolCalls {
                store: store.clone(),
                tools: tools.clone(),
                records: Some(records.clone()),
                approvals: Some(approvals.clone()),
                namespaces: namespaces.clone(),
            },
            limits: UnaryLimits {
                max_body_bytes: s.max_body_bytes,
                body_read_timeout: Duration::from_millis(s.body_read_timeout_ms),
            },
            metrics: metrics.clone(),
            quotas: quotas.clone(),
            bridge_runs: bridge_runs.clone(),
            run_event: traces.clone().map(|t| {
                Arc::new(move |ns: &Namespace, run_id: &str, doc: &str| {
                    t.run_event(ns, run_id, doc)
                }) as crate::rpc::RunEventHook
            }),
        };
        let api = ApiState::new(crate::api::ApiParts {
            store: store.clone(),
            records,
            config: config.api.clone(),
            tokens: ApiTokens {
                write: namespaces.api_tokens().clone(),
                read: namespaces.api_read_tokens().clone(),
                bridge: namespaces.bridge_tokens().clone(),
            },
            bridges: bridges.clone(),
            namespaces: namespaces.clone(),
            tools: tools.clone(),
            metrics: metrics.clone(),
            approvals,
            quotas: quotas.clone(),
        });
        let retention = match config.retention.max_age()? {
            Some(age) => Some((
                age,
                config.retention.interval()?,
                config.retention.batch_runs,
            )),
            None => None,
        };
        let router = router::router(
            state,
            namespaces.store_tokens().clone(),
            namespaces.tool_tokens().clone(),
            crate::api::router(api.clone()),
        );
        let reloader = Reloader {
            namespaces: namespaces.clone(),
            bridges,
            serves,
            source: self.reload,
        };
        Ok(App {
            listener,
            addr,
            router,
            store,
            tools,
            tokens,
            limits: ServerLimits {
                max_connections: s.max_connections,
                header_read_timeout: Duration::from_millis(s.header_read_timeout_ms),
                shutdown_grace: Duration::from_millis(s.shutdown_grace_ms),
                threads: s.threads,
            },
            api,
            retention,
            bridge_defaults: (config.bridge_model(), config.bridge_api_key()),
            db: config.store.path.clone(),
            store_desc: config.store.backend().describe(),
            namespaces,
            reloader,
            namespaced: !config.namespaces.is_empty(),
            quotas,
            traces,
            _run_ends: run_ends,
            webhooks,
            bridge_runs,
        })
    }
}

/// The trace export of `[telemetry]`, started; `None` when it is off.
fn start_traces(
    config: &Config,
    store: &Arc<dyn Store>,
    records: &Arc<dyn RunRecords>,
    metrics: &Metrics,
) -> anyhow::Result<Option<crate::telemetry::Traces>> {
    let Some(export) = config.telemetry.resolve(&|k| std::env::var(k).ok())? else {
        return Ok(None);
    };
    let sources = crate::telemetry::Sources {
        store: store.clone(),
        records: records.clone(),
        approvals: store.clone().approval_records(),
    };
    crate::telemetry::Traces::start(&export, sources, metrics.clone()).map(Some)
}

/// The daemon's [`Metrics`]: fed by `store`'s append notices and file sizes, behind the
/// metrics token if one is configured.
fn metrics_for(config: &Config, tokens: &Tokens, store: &dyn Store) -> anyhow::Result<Metrics> {
    let token = crate::metrics::token::resolve(&config.metrics, tokens)?;
    if token.is_none() && config.server.allow_remote {
        tracing::warn!(
            "server.allow_remote is set and metrics.token is not: /metrics is open to any \
             client that reaches the listener"
        );
    }
    // File sizes are SQLite's; a PostgreSQL server reports its own.
    let path = config
        .store
        .backend()
        .sqlite_path()
        .map(std::path::Path::to_path_buf);
    Ok(Metrics::new(
        store.subscribe(),
        move || {
            let s = path
                .as_deref()
                .map(crate::store::sqlite::files::sizes)
                .unwrap_or_default();
            StoreSizes {
                database_bytes: s.database,
                wal_bytes: s.wal,
            }
        },
        token.map(TokenSet::single),
    ))
}

/// The data directory: the database's (the tokens, runtime and runs files are there).
fn data_dir(db: &std::path::Path) -> std::path::PathBuf {
    match db.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    }
}

/// Ends the runs `runs` holds, whose bridge is gone (it exited), for `reason`, then lets go
/// of the runs file.
pub async fn end_bridge_runs(api: &ApiState, runs: &crate::bridge::BridgeRuns, reason: &str) {
    let left = runs.running();
    if api.ender().end_all(&left, reason).await {
        runs.release();
    }
}

/// `http://HOST:PORT/` for a bound address; a wildcard address is reached via loopback.
pub fn base_url(addr: SocketAddr) -> String {
    let host = match addr.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_string(),
        ip if ip.is_unspecified() => "[::1]".to_string(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    format!("http://{host}:{}/", addr.port())
}
