//! Everything about the Cursor SDK bridge, in one place: the flags that point it at this
//! daemon (`args`), the client the run API drives it with (`client`), and the slot per
//! namespace it is attached through (`slot`), and the end callbackd writes for a run no bridge
//! will finish (`end_run`), and the runs a supervised bridge is running (`runs_file`). Starting and watching the bridge as a
//! child is `supervisor`'s (`callbackd run`), which sits above the daemon it starts.

mod args;
mod client;
mod end_run;
pub mod runs_file;
mod slot;

pub use args::{shell_join, shell_quote, BridgeArgs, LOCAL_STORE_CUSTOM};
pub use client::BridgeClient;
pub(crate) use end_run::{Ended, RunEnder};
pub use runs_file::BridgeRuns;
pub use slot::{BridgeSlot, Bridges, NoBridge};
