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

/// A built daemon, listening but not yet serving.
pub struct App {
    listener: TcpListener,
    addr: SocketAddr,
    router: axum::Router,
    store: Arc<SqliteStore>,
    tokens: Tokens,
    limits: ServerLimits,
}

/// Builds an [`App`]; the place where plugins will be added before `build`.
pub struct AppBuilder {
    config: Config,
}

impl App {
    /// Starts building a daemon from a validated configuration.
    pub fn builder(config: Config) -> AppBuilder {
        AppBuilder { config }
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

    /// Serves until `shutdown` resolves, then drains in-flight calls and returns.
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        server::serve(self.listener, self.router, self.limits, shutdown).await;
        Ok(())
    }
}

impl AppBuilder {
    pub async fn build(self) -> anyhow::Result<App> {
        let config = self.config;
        config.validate()?;
        let tokens = tokens::resolve(&config.auth, &config.store.path)?;
        let store = {
            let opts = config.store.sqlite_options();
            tokio::task::spawn_blocking(move || SqliteStore::open(&opts))
                .await
                .context("opening the store")??
        };
        let store = Arc::new(store);
        let addr = config.server.listen_addr()?;
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        let addr = listener.local_addr()?;
        let s = &config.server;
        let state = RpcState {
            store: store.clone(),
            tools: rpc::tools::ToolService::default(),
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
            tokens,
            limits: ServerLimits {
                max_connections: s.max_connections,
                header_read_timeout: Duration::from_millis(s.header_read_timeout_ms),
                shutdown_grace: Duration::from_millis(s.shutdown_grace_ms),
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
