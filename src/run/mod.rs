//! The run, as callbackd understands the bridge's run document: one spelling of every status
//! ([`RunStatus`]) for the protocol handler, the approvals, the run API, the metrics and the
//! import, which used to list the terminal statuses each in their own words.
//!
//! A leaf: it knows JSON and nothing of the store, so the store and everything above can use
//! it; the store announces a run's end in it (`StoreNotice::RunEnded`). The mapping of a
//! run's stored events and callbackd's records to run events reads the store, so it lives
//! above it, in `crate::account`.

mod status;

pub use status::RunStatus;
