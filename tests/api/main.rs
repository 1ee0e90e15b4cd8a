//! Integration tests: the real daemon on 127.0.0.1, a random port and a temp-dir database,
//! driven over HTTP. One test binary; `helpers` has the `TestApp`.

mod helpers;

mod account;
mod ag_ui;
mod approvals;
mod approvals_bound;
mod backup;
mod client;
mod connect_errors;
mod copy_store;
mod crash;
mod decode_props;
mod find;
mod fork;
mod metrics;
mod namespaces;
mod postgres;
mod run_api;
mod run_api_browser;
mod run_api_exact;
mod runs_end;
mod see;
mod sse;
mod store_agents;
mod store_checkpoints;
mod store_concurrency;
mod store_fidelity;
mod store_run_events;
mod store_runs;
mod stream_limits;
mod telemetry;
mod tools;
mod transfer;
mod ui;
mod waited;
mod webhooks;
