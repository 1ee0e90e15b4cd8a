//! `callbackd follow`, `sessions` and `runs`: a terminal client of the run API (`/v1`), the
//! same API the web console uses, and nothing else: it works against any callbackd it can
//! reach, `serve` or `run`, local or behind a tunnel.
//!
//! - [`http`]: the HTTP/1.1 client (hyper's client connection) and its errors.
//! - [`sse`]: the Server-Sent Events parser.
//! - [`follow`]: one run to its end, resuming after drops with `after=<last durable seq>`.
//! - [`render`]: an event as one readable line.
//! - [`discover`]: where the daemon and the token are found, named in errors.
//! - [`commands`]: the three commands: where the URL and token come from, what is printed.
//! - [`fork`]: `callbackd fork RUN_ID`, a new session from a point of a conversation.
//! - [`table`]: columns that stay in line whatever the length of an id.
//! - [`webhooks`]: `callbackd webhooks`, the recent webhook deliveries.

pub mod commands;
pub mod discover;
pub mod follow;
pub mod fork;
pub mod http;
pub mod render;
pub mod sse;
mod table;
pub mod webhooks;

pub use follow::{follow, FollowOptions, Followed, Sink};
pub use http::{ApiClient, ClientError};
