//! Moving data in and out of the store: `callbackd backup` (a consistent copy of the live
//! database), and `callbackd export` / `import` in the bridge's own JSONL store layout, so a
//! user can move between the bridge's built-in store and callbackd in both directions.
//!
//! The SQLite specifics (`VACUUM INTO`, the dump and load SQL) live in `store::sqlite`; this
//! module holds the file formats and the commands.

pub mod backup;
pub mod jsonl;
pub mod jsonl_export;
pub mod jsonl_import;
pub mod progress;
