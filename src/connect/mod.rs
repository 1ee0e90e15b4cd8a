//! The subset of the Connect protocol callbackd speaks: unary RPCs over HTTP/1.1 POST with
//! the `application/json` and `application/proto` codecs, optional gzip request bodies,
//! `Connect-Protocol-Version: 1` and `connect-timeout-ms`. No streaming, no GET, as a
//! server; as a client ([`client`]), JSON unary and server-streaming calls (the run API
//! drives the bridge with them).
//!
//! This module knows nothing about agents or tools: it turns an HTTP request into a codec and
//! a body, and a [`ConnectError`] into the JSON error response the Connect spec prescribes.

pub mod client;
mod code;
mod error;
mod unary;

pub use code::Code;
pub use error::ConnectError;
pub use unary::{read_unary, unary_response, Codec, UnaryLimits, UnaryRequest};
