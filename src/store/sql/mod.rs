//! The SQL both backends run, written once: the statements of every store call, the filter
//! → `WHERE` translation ([`Conditions`]), keyset paging ([`Keyset`]) and page writing
//! ([`write_page`]), and the dispatch of a [`StoreCall`](super::StoreCall) to them
//! ([`call`]).
//!
//! A backend supplies an executor ([`Exec`]: run a statement, visit its rows) and its
//! [`Dialect`], which carries the few real differences: bind syntax (`?1` / `$1`), list
//! membership (`json_each(?)` / `= ANY($n)`), conflict detection, `FOR UPDATE`, casts, how
//! an append numbers its event. What is truly a backend's own stays there: SQLite's WAL
//! and writer thread, PostgreSQL's pool, retries and NOTIFY/LISTEN, each one's migrations.
//!
//! The operations are `async fn`s generic over the executor. PostgreSQL awaits them; on
//! SQLite every statement runs to completion when called, so the writer thread and the
//! readers drive them with [`ready`] and nothing is ever pending.

pub mod agents;
pub mod approvals;
pub mod call;
pub mod cascade;
pub mod checkpoints;
mod conditions;
pub mod deltas;
mod dialect;
pub mod dump;
mod exec;
pub mod find;
pub mod forks;
pub mod memory;
mod migrations;
pub mod outbox;
mod page;
pub mod prune;
pub mod records;
pub mod run_events;
pub mod runs;
pub mod threads;
pub mod transfer;

pub use conditions::Conditions;
pub(crate) use dialect::sql;
pub use dialect::{dollars, Dialect, Sql};
pub use exec::{Exec, Row, Value};
pub(crate) use migrations::migrations;
pub use page::{write_page, Keyset};

use std::future::Future;
use std::task::{Context, Poll, Waker};

use super::StoreError;

/// The output of a future that completes when first polled: an operation run on an executor
/// whose statements never wait (SQLite's). One still pending is an internal error, never a
/// hang.
pub fn ready<T, E: From<StoreError>>(fut: impl Future<Output = Result<T, E>>) -> Result<T, E> {
    let mut fut = std::pin::pin!(fut);
    match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => {
            Err(StoreError::Internal("a store statement did not complete".into()).into())
        }
    }
}

/// A future that may hold a SQLite connection (not `Send`): what a shared operation gives
/// SQLite's `sql_read` / `sql_write`, which poll it on the spot.
pub type LocalFuture<'a, T> = std::pin::Pin<Box<dyn Future<Output = T> + 'a>>;

/// Owned copies of a call's string arguments, for an operation run on another thread or
/// task (and, on PostgreSQL, again on a conflict).
pub fn owned<const N: usize>(args: [&str; N]) -> [String; N] {
    args.map(str::to_string)
}
