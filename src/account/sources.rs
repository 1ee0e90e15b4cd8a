//! [`RunSources`]: where the account of one run reads callbackd's records beside the
//! bridge's events, and the one rule of when it reads them again while mapping.

use super::durable::Durable;
use super::mapper::RunMapper;
use super::stored::StoredEvent;
use super::tool_call::Beside;
use crate::store::approvals::ApprovalRecords;
use crate::store::{Namespace, RunRecords, StoreError};

/// callbackd's records of run `run_id` of namespace `ns`.
pub struct RunSources<'a> {
    pub records: &'a dyn RunRecords,
    pub approvals: &'a dyn ApprovalRecords,
    pub ns: &'a Namespace,
    pub run_id: &'a str,
}

impl RunSources<'_> {
    /// callbackd's records of the run, as they are now: its tool calls and approvals.
    pub async fn beside(&self) -> Result<Beside, StoreError> {
        Ok(Beside {
            tool_calls: self.records.tool_calls_of_run(self.ns, self.run_id).await?,
            approvals: self
                .approvals
                .approvals_of_run(self.ns, self.run_id)
                .await?,
        })
    }

    /// The typed stream event of stored event `ev`, mapped by `mapper` (at `ev.seq - 1`),
    /// with callbackd's records read again first when `ev` tells how a call ended
    /// ([`RunMapper::needs_records`]; a failed read keeps the records it had). The calls a
    /// run's end closes wait in the mapper (`take_closed`).
    pub async fn map(&self, mapper: &mut RunMapper, ev: &StoredEvent) -> Durable {
        if mapper.needs_records(ev) {
            if let Ok(beside) = self.beside().await {
                mapper.set_beside(beside);
            }
        }
        mapper.map(ev)
    }
}
