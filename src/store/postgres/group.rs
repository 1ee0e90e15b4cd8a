//! Concurrent appends on PostgreSQL grouped into shared transactions (issue 26).
//!
//! An append is one statement ([`super::append`]), but alone it is also a transaction of
//! its own: a commit (a WAL flush with `fsync` on), a round trip and a wake-up of the
//! daemon, of PostgreSQL's backend and back. When many runs append at once (many agents
//! on one store), that per-append commit is what limits the rate. So appends are queued
//! here, and one group is in flight at a time, as SQLite's single writer does it: whoever
//! finds none in flight takes what is queued (up to [`MAX_GROUP`]) and sends it on one
//! pooled connection as `BEGIN`, the appends' statements pipelined (sent back to back,
//! answered back to back) and `COMMIT` — one commit and about three round trips for the
//! whole group — while the next group gathers in the queue. A lone append (the common case
//! of one bridge) still goes as its single autocommit statement, with no hand-off to
//! another task.
//!
//! Why one group and not several: measured on 2 cores with PostgreSQL on the same machine
//! (BENCHMARKS.md, "Appends grouped"), 64 clients appended fastest with one group in flight;
//! two or four in flight made smaller groups and more commits, and were slower.
//!
//! The rules of an append do not change: each statement is the same one, in arrival order
//! within a run, and later statements of a group see the earlier ones (an idempotency key
//! repeated in a group answers the first event). A quota refusal is that append's answer
//! and writes nothing, as alone. Any database error aborts the group's transaction, which
//! is then undone whole; every append of it runs again on its own, with the usual retries,
//! so a key race or a conflict is handled exactly as without grouping. Notices go out only
//! after the commit. Appends of a group are ordered by run, so two daemons' groups take the
//! runs' counter locks in the same order and cannot deadlock each other.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::future::join_all;
use tokio::sync::oneshot;

use super::db::Db;
use super::error::Fail;
use super::{append, Inner};
use crate::store::{EventAppended, Namespace, NewEvent, StoreError, StoreOutput};

/// The most appends one transaction takes: bounds the wait of the group's first append and
/// how long its row locks are held.
pub const MAX_GROUP: usize = 64;

/// What an append answers.
pub type Appended = (StoreOutput, Option<EventAppended>);

/// An append waiting for its group.
pub struct Pending {
    pub ns: Namespace,
    pub ev: NewEvent,
    reply: oneshot::Sender<Result<Appended, StoreError>>,
}

impl Pending {
    pub fn new(
        ns: Namespace,
        ev: NewEvent,
    ) -> (Pending, oneshot::Receiver<Result<Appended, StoreError>>) {
        let (reply, rx) = oneshot::channel();
        (Pending { ns, ev, reply }, rx)
    }

    pub fn answer(self, out: Result<Appended, StoreError>) {
        // The caller may have gone (its request was dropped): the append stands anyway.
        let _ = self.reply.send(out);
    }
}

/// The queue of appends, and whether a group is being run.
#[derive(Default)]
pub struct Queue {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Pending>,
    /// A caller or a task is running groups.
    running: bool,
}

impl Queue {
    pub fn new() -> Queue {
        Queue::default()
    }

    /// Queues an append; true if the caller is to run groups now (nobody was), in which
    /// case it must call [`Queue::take`] until it gives `None` or hand the role on with
    /// [`Queue::hand_off`].
    pub fn push(&self, p: Pending) -> bool {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.queue.push_back(p);
        !std::mem::replace(&mut s.running, true)
    }

    /// The next group, oldest first; `None` (and the caller is no longer running groups)
    /// when nothing is queued.
    pub fn take(&self) -> Option<Vec<Pending>> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.queue.is_empty() {
            s.running = false;
            return None;
        }
        let n = s.queue.len().min(MAX_GROUP);
        Some(s.queue.drain(..n).collect())
    }

    /// For a caller whose own append was answered: true if appends are still queued (its
    /// role goes on in a task of its own); false, and it no longer runs groups, if not.
    pub fn hand_off(&self) -> bool {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.queue.is_empty() {
            s.running = false;
        }
        s.running
    }
}

impl Inner {
    /// Appends one event, grouped with whatever other appends are queued (see the module).
    pub(super) async fn append(
        self: &Arc<Self>,
        ns: Namespace,
        ev: NewEvent,
    ) -> Result<Appended, StoreError> {
        let (pending, mut answer) = Pending::new(ns, ev);
        if !self.appends.push(pending) {
            return answered(answer.await);
        }
        // This caller runs groups until its own append is answered, then hands the role to
        // a task if appends are still queued: a lone append costs no hand-off.
        while let Some(group) = self.appends.take() {
            self.run_group(group).await;
            if let Ok(out) = answer.try_recv() {
                if self.appends.hand_off() {
                    let inner = self.clone();
                    tokio::spawn(async move { inner.run_queue().await });
                }
                return out;
            }
        }
        answered(answer.await)
    }

    /// Runs groups until the queue is empty (the role handed on by a caller).
    async fn run_queue(&self) {
        while let Some(group) = self.appends.take() {
            self.run_group(group).await;
        }
    }

    /// Runs one group and answers each of its appends.
    async fn run_group(&self, mut group: Vec<Pending>) {
        if group.len() == 1 {
            let p = group.pop().expect("one");
            let out = self.retrying(|| self.append_alone(&p.ns, &p.ev)).await;
            p.answer(out);
            return;
        }
        // Stable: arrival order within a run; one lock order across daemons.
        group.sort_by(|a, b| {
            (a.ns.as_str(), a.ev.run_id.as_str()).cmp(&(b.ns.as_str(), b.ev.run_id.as_str()))
        });
        match self.in_one_transaction(&group).await {
            Ok(answers) => {
                for (p, out) in group.into_iter().zip(answers) {
                    p.answer(out);
                }
            }
            Err(e) => {
                tracing::debug!(appends = group.len(), error = ?e, "a group of appends was undone; running each on its own");
                join_all(group.into_iter().map(|p| async move {
                    let out = self.retrying(|| self.append_alone(&p.ns, &p.ev)).await;
                    p.answer(out);
                }))
                .await;
            }
        }
    }

    /// `BEGIN`, the group's statements pipelined, `COMMIT`. `Ok` has each append's answer
    /// (a quota refusal is one); `Err`: the transaction was undone, nothing was written.
    async fn in_one_transaction(
        &self,
        group: &[Pending],
    ) -> Result<Vec<Result<Appended, StoreError>>, Fail> {
        let mut client = self.pool.get().await?;
        let tx = client.transaction().await?;
        let db = Db::tx(&tx, self.prepared);
        let outs = join_all(
            group
                .iter()
                .map(|p| append::append(&db, &p.ns, &p.ev, &self.instance, &self.schema)),
        )
        .await;
        let mut answers = Vec::with_capacity(outs.len());
        for out in outs {
            match out {
                Ok(v) => answers.push(Ok(v)),
                // Decided before anything was written (the quota): the transaction goes on.
                Err(Fail::Store(e)) => answers.push(Err(e)),
                Err(e) => return Err(e),
            }
        }
        tx.commit().await?;
        Ok(answers)
    }

    /// One append in its own autocommit statement.
    async fn append_alone(&self, ns: &Namespace, ev: &NewEvent) -> Result<Appended, Fail> {
        let client = self.pool.get().await?;
        let db = Db::client(&client, self.prepared);
        append::append(&db, ns, ev, &self.instance, &self.schema).await
    }
}

fn answered(
    out: Result<Result<Appended, StoreError>, oneshot::error::RecvError>,
) -> Result<Appended, StoreError> {
    out.map_err(|_| {
        StoreError::Internal("the append's group was dropped before it answered".into())
    })?
}
