//! What an approval looks like from outside: [`ApprovalView`] (the API, the streams, the
//! console), [`ApprovalEvent`] (what a run's streams are told) and [`Outcome`] (what the
//! held call is told). Kept apart from the state machine so that the shapes people and
//! clients read can be checked in one place.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use crate::clock::rfc3339_ms;
use crate::store::approvals::ApprovalRecord;
use crate::store::Namespace;

/// An approval as the API and the stream show it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ApprovalView {
    pub id: String,
    pub tool: String,
    pub tool_call_id: Option<String>,
    /// The call's arguments, as the model gave them.
    #[schemars(with = "serde_json::Map<String, Value>")]
    pub args: Value,
    /// The arguments a person edited before approving (what the tool ran with).
    pub approved_args: Option<Value>,
    /// Whether the tool ran with arguments a person edited.
    pub edited: bool,
    /// The tool is marked `confirm = true`: the console asks the person to confirm an
    /// approval in a second step before it sends it.
    pub confirm: bool,
    pub expires_at: String,
    pub created_at: String,
    pub session_id: String,
    pub run_id: Option<String>,
    /// `pending`, `approved`, `denied`, `expired` or `cancelled`.
    pub state: String,
    pub decided_by: Option<String>,
    pub decided_at: Option<String>,
    pub reason: Option<String>,
}

impl From<&ApprovalRecord> for ApprovalView {
    fn from(r: &ApprovalRecord) -> Self {
        ApprovalView {
            id: r.id.clone(),
            tool: r.tool.clone(),
            tool_call_id: r.tool_call_id.clone(),
            args: r.args.clone(),
            approved_args: r.approved_args.clone(),
            edited: r.approved_args.is_some(),
            confirm: r.confirm,
            expires_at: rfc3339_ms(r.expires_at_ms),
            created_at: rfc3339_ms(r.created_at_ms),
            session_id: r.agent_id.clone(),
            run_id: r.run_id.clone(),
            state: r.state.clone(),
            decided_by: r.decided_by.clone(),
            decided_at: r.decided_at_ms.map(rfc3339_ms),
            reason: r.reason.clone(),
        }
    }
}

/// What the streams of a run are told.
#[derive(Debug, Clone)]
pub enum ApprovalEvent {
    Required {
        ns: Namespace,
        run_id: Option<String>,
        approval: Box<ApprovalView>,
    },
    Resolved {
        ns: Namespace,
        run_id: Option<String>,
        approval_id: String,
        decision: String,
        by: Option<String>,
        reason: Option<String>,
        /// The tool ran with arguments a person edited (never for a question).
        edited: bool,
        /// A question (`ask_user`): its answer, when it was answered.
        question: Option<Option<String>>,
    },
}

impl ApprovalEvent {
    pub fn is_for(&self, ns: &Namespace, run: &str) -> bool {
        let (n, r) = match self {
            ApprovalEvent::Required { ns, run_id, .. }
            | ApprovalEvent::Resolved { ns, run_id, .. } => (ns, run_id),
        };
        n == ns && r.as_deref() == Some(run)
    }
}

/// How a held call's wait ended, as its approval's record says.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Run it, with `args` when a person edited them.
    Approved {
        by: String,
        args: Option<Value>,
    },
    Denied {
        by: String,
        reason: Option<String>,
    },
    /// No decision in time: denied.
    Expired {
        after: Duration,
    },
    /// It can no longer run (its run ended, callbackd stops, ...).
    Cancelled {
        reason: String,
    },
}

impl Outcome {
    pub(super) fn of(rec: &ApprovalRecord, timeout: Duration) -> Option<Outcome> {
        let by = || rec.decided_by.clone().unwrap_or_default();
        Some(match rec.state.as_str() {
            "approved" => Outcome::Approved {
                by: by(),
                args: rec.approved_args.clone(),
            },
            "denied" => Outcome::Denied {
                by: by(),
                reason: rec.reason.clone(),
            },
            "expired" => Outcome::Expired { after: timeout },
            "cancelled" => Outcome::Cancelled {
                reason: rec.reason.clone().unwrap_or_default(),
            },
            _ => return None,
        })
    }
}
