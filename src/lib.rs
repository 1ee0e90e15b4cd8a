//! callbackd: the store and custom-tool callback daemon for the Cursor SDK bridge.
//!
//! The bridge, started with `--local-store '{"type":"custom"}'`, sends every read and write
//! of agent state to `sdk.v1.SdkStoreCallbackService/CallStore`, and every custom tool call
//! to `sdk.v1.SdkCustomToolCallbackService/CallCustomTool`. callbackd serves both: the store
//! on SQLite, the tools from a registry of Rust plugins and TOML-declared commands.
//!
//! Layout:
//! - [`api`]: the run API (`/v1`): sessions, messages and resumable run streams over SSE.
//! - [`approvals`]: human approval of tool calls (policies, held calls, decisions).
//! - [`app`]: builds the daemon from a [`Config`] (listener, store, router) and runs it.
//! - [`server`]: the HTTP/1.1 accept loop (connection cap, header timeout, `TCP_NODELAY`).
//! - [`connect`]: the Connect unary protocol (codecs, errors), nothing domain-specific.
//! - [`auth`]: bearer tokens as a tower layer; a token grants a namespace.
//! - [`rpc`]: the two RPCs, where the protocol meets the store and the tools.
//! - [`store`]: the substores as typed calls behind the [`Store`] trait, the tools' data
//!   behind [`store::ToolData`], the output shapes every backend shares; the backends.
//! - [`tools`]: custom tools: the [`Tool`] plugin trait, the registry, command tools from
//!   TOML, the built-in `echo` and `memory`, and the bounds every call runs under.
//! - [`supervisor`]: `callbackd run -- <bridge>`: the bridge as a child, wired on argv.
//! - [`metrics`]: `GET /metrics` (Prometheus), fed by the RPCs and the store.
//! - [`transfer`]: `callbackd backup`, `export` and `import` (the bridge's JSONL layout).
//! - [`client`]: `callbackd follow|sessions|runs`, a terminal client of the run API.
//! - [`ui`]: the web console at `/ui/`, static files compiled into the binary.
//! - [`manual`]: shell completions and the man page, from the clap definition.
//! - [`runtime_file`], [`ready_line`]: how a running daemon is announced (stderr, without
//!   secrets) and found by the client commands (a 0600 file in the data directory).
//! - [`prune`]: `callbackd prune` (dry run, confirmation, space returned).
//! - [`closed_stdout`]: `callbackd … | head` ends quietly.
//! - [`config`], [`cli`], [`telemetry`], [`shutdown`]: the daemon's plumbing.

pub mod api;
pub mod app;
pub mod approvals;
pub mod auth;
pub mod bridge;
pub mod cli;
pub mod client;
pub mod closed_stdout;
pub mod config;
pub mod connect;
pub mod data_dir;
pub mod error_chain;
pub mod health;
pub mod manual;
pub mod metrics;
pub mod namespaces;
pub mod prune;
pub mod rpc;
pub mod runtime_file;
pub mod secret;
pub mod server;
pub mod shutdown;
pub mod store;
pub mod supervisor;
pub mod telemetry;
pub mod tokens;
pub mod tools;
pub mod transfer;
pub mod ui;

pub use app::App;
pub use config::Config;
pub use store::{Namespace, Store, StoreCall, StoreError, StoreNotice};
pub use tools::{Tool, ToolContext, ToolError, ToolRegistry};

pub mod proto;
pub mod ready_line;
