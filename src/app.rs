//! [`App`]: the daemon assembled from a [`Config`]: listener bound, store opened and
//! migrated, tokens resolved, router built. `main` runs it until a signal; tests run it
//! until they drop a oneshot.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::auth::TokenSet;
use crate::config::Config;
use crate::connect::UnaryLimits;
use crate::rpc::{self, RpcState};
use crate::server::{self, ServerLimits};
use crate::store::sqlite::SqliteStore;
use crate::tokens::{self, Tokens};
use crate::tools::builtin::builtins;
use crate::tools::{Tool, ToolRegistry};

/// A built daemon, listening but not yet serving.
pub struct App {
    listener: TcpListener,
    addr: SocketAddr,
    router: axum::Router,
    store: Arc<SqliteStore>,
    tools: rpc::tools::ToolService,
    tokens: Tokens,
    limits: ServerLimits,
}

/// Builds an [`App`]: the configuration, plus the plugin tools a user's own `main` adds.
pub struct AppBuilder {
    config: Config,
    tools: Vec<Arc<dyn Tool>>,
}

impl App {
    /// Starts building a daemon from a validated configuration.
    pub fn builder(config: Config) -> AppBuilder {
        AppBuilder {
            config,
            tools: Vec::new(),
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

    pub fn tokens(&self) -> &Tokens {
        &self.tokens
    }

    pub fn store(&self) -> Arc<SqliteStore> {
        self.store.clone()
    }

    /// Serves until `shutdown` resolves, then drains in-flight calls and returns. Custom
    /// tool calls run on the runtime this is called on (see `rpc::tools::ToolService`).
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        self.tools.run_on(tokio::runtime::Handle::current());
        server::serve(self.listener, self.router, self.limits, shutdown).await;
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
        let tokens = tokens::resolve(&config.auth, &config.store.path)?;
        let store = {
            let opts = config.store.sqlite_options();
            tokio::task::spawn_blocking(move || SqliteStore::open(&opts))
                .await
                .context("opening the store")??
        };
        let store = Arc::new(store);
        let registry =
            ToolRegistry::from_config(&config.tools, builtins(Some(store.clone())), &self.tools)
                .context("invalid tool configuration")?;
        tracing::info!(
            tools = %registry.names().collect::<Vec<_>>().join(","),
            "custom tools registered"
        );
        let s = &config.server;
        let tools = rpc::tools::ToolService::new(Arc::new(registry));
        let state = RpcState {
            store: store.clone(),
            tools: tools.clone(),
            limits: UnaryLimits {
                max_body_bytes: s.max_body_bytes,
                body_read_timeout: Duration::from_millis(s.body_read_timeout_ms),
            },
        };
        let router = rpc::router(
            state,
            TokenSet::single(tokens.store.clone()),
            TokenSet::single(tokens.tool.clone()),
        );
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
        })
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
