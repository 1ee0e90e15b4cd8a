//! [`StoreCall`]: a `CallStore` request parsed once, at the edge, into a typed operation.
//! Everything downstream trusts these types and never looks at the raw input again. The
//! parsing is in [`parse`].

mod parse;
use super::{AgentCursor, JsonText, RunCursor, StoreError};

/// Default page size of the catalog lists (agents, runs, checkpoints).
pub const DEFAULT_CATALOG_LIMIT: usize = 50;
/// Default page size of `runEvents.list`.
pub const DEFAULT_EVENTS_LIMIT: usize = 100;

/// An agent document: the keys the store indexes, plus the whole document as sent.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentDoc {
    pub agent_id: String,
    pub cwd: String,
    /// `updatedAt` (epoch ms); 0 when the document has none.
    pub updated_at: f64,
    pub json: JsonText,
}

/// A run document: the keys the store indexes, plus the whole document as sent.
#[derive(Debug, Clone, PartialEq)]
pub struct RunDoc {
    pub agent_id: String,
    pub run_id: String,
    /// `turnNumber`; 0 when the document has none.
    pub turn_number: f64,
    pub json: JsonText,
}

/// A `runEvents.append` input.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub run_id: String,
    pub event_type: String,
    /// The payload as JSON text; `null` when the append had none.
    pub payload: JsonText,
    pub payload_ref: Option<String>,
    pub idempotency_key: Option<String>,
    /// The namespace's `max_events_per_run` quota, set by the caller after parsing (never
    /// from the request): checked inside the append's transaction against the seq it
    /// assigns, so it is exact and costs nothing extra.
    pub max_events: Option<u64>,
}

impl NewEvent {
    /// The quota error of an append that would get `seq`, if that is over `max_events`.
    pub fn over_quota(&self, ns: &super::Namespace, seq: i64) -> Option<super::StoreError> {
        let max = self.max_events?;
        (u64::try_from(seq).unwrap_or(0) > max).then(|| {
            super::StoreError::Quota(format!(
                "namespace {} is at its max_events_per_run quota ({max}) for run {}; nothing \
                 was written",
                ns.as_str(),
                self.run_id
            ))
        })
    }
}

/// One page of a list: where to start and how many items at most.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<C> {
    pub cursor: Option<C>,
    pub limit: usize,
}

/// `agents` filter. `None` (absent or `[]`) does not constrain.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentFilter {
    pub agent_ids: Option<Vec<String>>,
    pub cwd: Option<String>,
}

/// `runs` filter. Both lists present means AND.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunFilter {
    pub agent_ids: Option<Vec<String>>,
    pub run_ids: Option<Vec<String>>,
}

/// `checkpoints` filter.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CheckpointFilter {
    pub agent_ids: Option<Vec<String>>,
    pub blob_ids: Option<Vec<String>>,
}

/// One store operation with its input, as the contract's operation matrix (§2.1) lists them.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreCall {
    AgentsGet {
        agent_id: String,
    },
    AgentsCreate(AgentDoc),
    AgentsUpdate(AgentDoc),
    AgentsDelete(AgentFilter),
    AgentsList(AgentFilter, Page<AgentCursor>),
    RunsGet {
        agent_id: String,
        run_id: String,
    },
    RunsCreate(RunDoc),
    RunsUpdate(RunDoc),
    RunsDelete(RunFilter),
    RunsList(RunFilter, Page<RunCursor>),
    EventsAppend(NewEvent),
    /// Events with `seq > after_seq`, in seq order.
    EventsList {
        run_id: String,
        after_seq: u64,
        limit: usize,
    },
    /// `None` deletes the events of every run.
    EventsDelete {
        run_ids: Option<Vec<String>>,
    },
    CheckpointsGet {
        agent_id: String,
        blob_id: String,
    },
    CheckpointsCreate {
        agent_id: String,
        blob_id: String,
        data: Vec<u8>,
    },
    CheckpointsUpdate {
        agent_id: String,
        blob_id: String,
        data: Vec<u8>,
    },
    CheckpointsDelete(CheckpointFilter),
    /// The cursor is the last blob id of the previous page.
    CheckpointsList(CheckpointFilter, Page<String>),
}

impl StoreCall {
    /// Every `substore.method` there is ([`name`](Self::name) of each kind of call): a log
    /// line or metric names a refused call by one of these, never by a name as sent.
    pub const NAMES: [&'static str; 18] = [
        "agents.get",
        "agents.create",
        "agents.update",
        "agents.delete",
        "agents.list",
        "runs.get",
        "runs.create",
        "runs.update",
        "runs.delete",
        "runs.list",
        "runEvents.append",
        "runEvents.list",
        "runEvents.delete",
        "checkpoints.get",
        "checkpoints.create",
        "checkpoints.update",
        "checkpoints.delete",
        "checkpoints.list",
    ];

    /// `substore.method`, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            StoreCall::AgentsGet { .. } => "agents.get",
            StoreCall::AgentsCreate(_) => "agents.create",
            StoreCall::AgentsUpdate(_) => "agents.update",
            StoreCall::AgentsDelete(_) => "agents.delete",
            StoreCall::AgentsList(..) => "agents.list",
            StoreCall::RunsGet { .. } => "runs.get",
            StoreCall::RunsCreate(_) => "runs.create",
            StoreCall::RunsUpdate(_) => "runs.update",
            StoreCall::RunsDelete(_) => "runs.delete",
            StoreCall::RunsList(..) => "runs.list",
            StoreCall::EventsAppend(_) => "runEvents.append",
            StoreCall::EventsList { .. } => "runEvents.list",
            StoreCall::EventsDelete { .. } => "runEvents.delete",
            StoreCall::CheckpointsGet { .. } => "checkpoints.get",
            StoreCall::CheckpointsCreate { .. } => "checkpoints.create",
            StoreCall::CheckpointsUpdate { .. } => "checkpoints.update",
            StoreCall::CheckpointsDelete(_) => "checkpoints.delete",
            StoreCall::CheckpointsList(..) => "checkpoints.list",
        }
    }

    /// The call with any list `limit` cut to `max` (`store.max_page_size`): the rest
    /// follows through the cursor.
    pub fn clamp(self, max: usize) -> StoreCall {
        let max = max.max(1);
        match self {
            StoreCall::AgentsList(f, mut p) => {
                p.limit = p.limit.min(max);
                StoreCall::AgentsList(f, p)
            }
            StoreCall::RunsList(f, mut p) => {
                p.limit = p.limit.min(max);
                StoreCall::RunsList(f, p)
            }
            StoreCall::CheckpointsList(f, mut p) => {
                p.limit = p.limit.min(max);
                StoreCall::CheckpointsList(f, p)
            }
            StoreCall::EventsList {
                run_id,
                after_seq,
                limit,
            } => StoreCall::EventsList {
                run_id,
                after_seq,
                limit: limit.min(max),
            },
            other => other,
        }
    }

    /// Whether the call changes stored data (and so goes through the writer).
    pub fn is_write(&self) -> bool {
        !matches!(
            self,
            StoreCall::AgentsGet { .. }
                | StoreCall::AgentsList(..)
                | StoreCall::RunsGet { .. }
                | StoreCall::RunsList(..)
                | StoreCall::EventsList { .. }
                | StoreCall::CheckpointsGet { .. }
                | StoreCall::CheckpointsList(..)
        )
    }
}

#[cfg(test)]
mod tests;
