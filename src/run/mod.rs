//! The run, as callbackd understands the bridge's run document: one spelling of every status
//! ([`RunStatus`]) for the protocol handler, the approvals, the run API, the metrics and the
//! import, which used to list the terminal statuses each in their own words.
//!
//! A leaf: it knows JSON and nothing of the store, so the store and everything above can use
//! it. Not here yet (issue 35, item 1, left for later): the mapping of stored events and
//! callbackd's records to run events (`api/feed.rs`, `telemetry/collect.rs`) and a
//! `RunEnded` store notice replacing the protocol handler's calls into approvals and
//! telemetry.

mod status;

pub use status::RunStatus;
