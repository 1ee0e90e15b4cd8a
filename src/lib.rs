//! callbackd: the store and custom-tool callback daemon for the Cursor SDK bridge.
//!
//! The bridge, started with `--local-store '{"type":"custom"}'`, sends every read and write
//! of agent state to `sdk.v1.SdkStoreCallbackService/CallStore`, and every custom tool call
//! to `sdk.v1.SdkCustomToolCallbackService/CallCustomTool`. callbackd serves both: the store
//! on SQLite or PostgreSQL, the tools from a registry of Rust plugins and TOML-declared
//! commands. For people it serves the run API (`/v1`), the web console and approvals.
//!
//! Modules:
//! - [`app`]: the one composition root: builds the daemon from a [`Config`] (listener,
//!   store, services), owns the route table (`app::router`) and the reload (`app::reload`).
//! - [`api`]: the run API (`/v1`): sessions, messages, runs, resumable streams over SSE,
//!   approvals (HTTP only).
//! - [`account`]: the one account of every run: the bridge's stored events plus callbackd's
//!   records (tool calls, approvals, questions) mapped to the run's events and tool calls,
//!   which the run API and the traces both tell.
//! - [`rpc`]: the bridge's two callback RPCs, where the protocol meets the store and tools.
//! - [`bridge`]: everything about the bridge: its flags, the client the run API drives it
//!   with, the slot per namespace it is attached through.
//! - [`namespaces`]: who may do what (tokens by namespace, allowlists, quotas); `metrics`:
//!   what is counted (`GET /metrics`); `tool_calls`: one custom tool call the bridge sends,
//!   from the allowlist to the answer (recorded, held for a person, invoked).
//! - `approvals`: held tool calls and people's decisions; `auth`: bearer tokens as a tower
//!   layer; [`tools`]: the [`Tool`] trait, the registry, command tools, the tool service,
//!   the approval policy and AG-UI apps' held frontend tool calls; [`transfer`]: `backup`, `export`, `import`.
//! - [`run`]: the run's one spelling of its statuses ([`run::RunStatus`]), below the store.
//! - [`store`]: the substores as typed calls behind the [`Store`] trait, and the backends.
//! - [`tokens`]: the daemon's generated tokens; [`telemetry`]: logging, and OpenTelemetry
//!   traces of runs told by the run's [`account`] (below `api`; told of a run's end by the
//!   store's `RunEnded` notice, wired in `app`).
//! - [`config`]: the configuration, a leaf: one file per section.
//! - [`secret`], `clock`, [`connect`] (the Connect protocol), [`proto`], `server` (the
//!   HTTP/1.1 accept loop), `ui` (the console's files), `data_dir`, [`health`],
//!   [`shutdown`], [`error_chain`]: the plumbing nothing else is built on.
//! - `webhooks`: signed POSTs to people's endpoints from the store's outbox (beside `rpc`:
//!   it counts its attempts in `metrics`); `outbound`: one plain HTTP request over hyper
//!   (the webhooks' and the OTLP exporter's client).
//! - [`cli`], [`client`] (`follow`, `sessions`, `runs`, ...), [`supervisor`] (`callbackd
//!   run -- <bridge>`, and how a ready daemon is announced: its ready line without secrets
//!   and the runtime file the client commands find it by): the command line, above the
//!   daemon; the binary's `commands/` holds one file per command (`prune`, shell
//!   `completions` and the `man` page, ...).
//!
//! Layers, top to bottom. A module may use the modules on its own line and below, never
//! above, and no import closes a circle, between files or between these modules
//! (`tests/layers.rs` checks both, reading this block; the binary, which reaches the database
//! only through [`store`], names no database driver):
//!
//! ```text
//! commands (the binary: main.rs, commands/)  cli  client  supervisor
//! app
//! api
//! rpc  bridge  webhooks
//! telemetry
//! namespaces  metrics  tool_calls
//! account
//! approvals  auth  tools  transfer
//! store
//! run
//! tokens
//! config
//! secret  clock  connect  proto  server  ui  data_dir  health  shutdown  error_chain  percent  outbound  json_skim
//! ```

pub mod account;
pub mod api;
pub mod app;
mod approvals;
mod auth;
pub mod bridge;
pub mod cli;
pub mod client;
mod clock;
pub mod config;
pub mod connect;
mod data_dir;
pub mod error_chain;
pub mod health;
mod json_skim;
mod metrics;
pub mod namespaces;
mod outbound;
mod percent;
pub mod proto;
pub mod rpc;
pub mod run;
pub mod secret;
mod server;
pub mod shutdown;
pub mod store;
pub mod supervisor;
pub mod telemetry;
pub mod tokens;
mod tool_calls;
pub mod tools;
pub mod transfer;
mod ui;
mod webhooks;

pub use app::App;
pub use config::Config;
pub use store::{Namespace, Store, StoreCall, StoreError, StoreNotice};
pub use tools::{Tool, ToolContext, ToolError, ToolRegistry};
