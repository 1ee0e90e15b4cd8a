//! The dispatch of a [`StoreCall`] to the SQL that answers it.

use super::{agents, cascade, checkpoints, run_events, runs, Exec};
use crate::run::RunStatus;
use crate::store::outbox::{Composer, Happening};
use crate::store::{Namespace, RunDoc, StoreCall, StoreError, StoreNotice, StoreOutput};

/// Read-only calls.
pub async fn read<X: Exec>(x: &X, ns: &str, call: &StoreCall) -> Result<StoreOutput, X::Error> {
    match call {
        StoreCall::AgentsGet { agent_id } => agents::get(x, ns, agent_id).await,
        StoreCall::AgentsList(f, p) => agents::list(x, ns, f, p).await,
        StoreCall::RunsGet { agent_id, run_id } => runs::get(x, ns, agent_id, run_id).await,
        StoreCall::RunsList(f, p) => runs::list(x, ns, f, p).await,
        StoreCall::EventsList {
            run_id,
            after_seq,
            limit,
        } => run_events::list(x, ns, run_id, *after_seq, *limit).await,
        StoreCall::CheckpointsGet { agent_id, blob_id } => {
            checkpoints::get(x, ns, agent_id, blob_id).await
        }
        StoreCall::CheckpointsList(f, p) => checkpoints::list(x, ns, f, p).await,
        write => Err(StoreError::Internal(format!("{} sent as a read", write.name())).into()),
    }
}

/// Writing calls, run inside a transaction. An append gives the notice for live followers
/// ([`StoreNotice::Appended`]), a `runs.update` that ends its run [`StoreNotice::RunEnded`]:
/// the backend sends it once the transaction committed.
///
/// `outbox` records, in the same transaction, the webhooks of what the write did (a run's
/// end is a `runs.update`: the composer reads its status).
pub async fn write<X: Exec>(
    x: &X,
    ns: &Namespace,
    call: &StoreCall,
    outbox: Option<&dyn Composer>,
) -> Result<(StoreOutput, Option<StoreNotice>), X::Error> {
    let n = ns.as_str();
    let output = match call {
        StoreCall::EventsAppend(ev) => {
            let (output, notice) = run_events::append(x, ns, ev).await?;
            return Ok((output, notice.map(StoreNotice::Appended)));
        }
        StoreCall::AgentsCreate(doc) => agents::create(x, n, doc).await,
        StoreCall::AgentsUpdate(doc) => agents::update(x, n, doc).await,
        StoreCall::AgentsDelete(f) => agents::delete(x, n, f).await,
        StoreCall::RunsCreate(doc) => runs::create(x, n, doc).await,
        StoreCall::RunsUpdate(doc) => {
            // A run's end: the document it replaces was not terminal yet (read, locked,
            // only when the new one is: once per run).
            let ends = match terminal_status(doc) {
                Some(status) => {
                    let before = runs::get_locked(x, n, &doc.agent_id, &doc.run_id).await?;
                    let was_terminal = before
                        .and_then(|d| serde_json::from_str(&d).ok())
                        .and_then(|d| RunStatus::of_doc(&d))
                        .is_some_and(RunStatus::is_terminal);
                    (!was_terminal).then_some(status)
                }
                None => None,
            };
            let out = runs::update(x, n, doc).await?;
            let happening = Happening::RunUpdated {
                ns,
                agent_id: &doc.agent_id,
                run_id: &doc.run_id,
                doc: doc.json.as_str(),
            };
            super::outbox::record(x, outbox, &happening).await?;
            let notice = ends.map(|status| StoreNotice::RunEnded {
                ns: ns.clone(),
                run_id: doc.run_id.clone(),
                status,
            });
            return Ok((out, notice));
        }
        StoreCall::RunsDelete(f) => runs::delete(x, n, f).await,
        StoreCall::EventsDelete { run_ids } => {
            cascade::delete_events(x, n, run_ids.as_deref()).await
        }
        StoreCall::CheckpointsCreate {
            agent_id,
            blob_id,
            data,
        } => checkpoints::create(x, n, agent_id, blob_id, data).await,
        StoreCall::CheckpointsUpdate {
            agent_id,
            blob_id,
            data,
        } => checkpoints::update(x, n, agent_id, blob_id, data).await,
        StoreCall::CheckpointsDelete(f) => checkpoints::delete(x, n, f).await,
        read => {
            return Err(StoreError::Internal(format!("{} sent as a write", read.name())).into())
        }
    }?;
    Ok((output, None))
}

/// The status of run document `doc` if it is terminal (a cheap text check first: most
/// updates are of running runs).
fn terminal_status(doc: &RunDoc) -> Option<RunStatus> {
    let text = doc.json.as_str();
    if !RunStatus::terminal().any(|s| text.contains(s.as_str())) {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    RunStatus::of_doc(&v).filter(|s| s.is_terminal())
}
