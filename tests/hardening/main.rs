//! Hardening tests against the real `callbackd` binary, spawned as a child process with a
//! generated config: hostile clients (also across two namespaces), slow clients and the
//! connection cap, and resource faults (full disk, locked or read-only database).
//! `scripts/hardening` runs the big versions (see "Hardening tests" in docs/hardening.md).

mod daemon;

mod cross_namespace;
mod faults;
mod hostile;
mod limits;
