//! [`ToolCall`]: the one account of a tool call that every view gives (the run state, the
//! per-call endpoint, the stream's `tool_completed`, `follow`, the console): what it ran
//! with, what the model asked when a person changed it, what the tool returned, how it
//! ended, how long it ran and how long it waited for a person, and the person's decision
//! or answer. Built from the bridge's stored `tool_call` events and callbackd's records
//! beside them ([`Beside`]), which are final before the bridge stores a call's completion,
//! so a replay tells what the live stream told.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use crate::clock::rfc3339_ms;
use crate::store::approvals::ApprovalRecord;
use crate::store::records::{ToolCallRecord, ToolOutcome};

/// One tool call of a run, as every view tells it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
pub struct ToolCall {
    pub tool_call_id: String,
    pub tool: String,
    /// How the call ended: `ok`, `error`, `denied` (a person said no), `expired` (nobody
    /// decided in time), `cancelled` (its run ended, or callbackd stopped, before it did)
    /// or `timeout`; while it has not ended, `awaiting` (held for a person) or `running`.
    pub outcome: &'static str,
    pub started_at: String,
    pub ended_at: Option<String>,
    /// The execution time only: a held call's starts when it was approved.
    pub duration_ms: Option<i64>,
    /// A held call: how long it waited for the person (not in `duration_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_ms: Option<i64>,
    /// What the tool ran with: the arguments a person approved (edited or not), else the
    /// model's.
    #[schemars(with = "Option<super::schema::Object>")]
    pub arguments: Value,
    /// What the model asked, present only when a person changed it before approving.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<super::schema::Object>")]
    pub requested_arguments: Option<Value>,
    /// What the tool returned, its own JSON: for a custom tool callbackd's record of it
    /// (`{"error": "..."}` when it failed or never ran), for a built-in tool the bridge's
    /// stored result. `null` while it runs.
    pub result: Value,
    /// Stopped mid-execution (timed out, panicked, cut off): its effect is unknown.
    pub cut_off: bool,
    /// A call held for approval: the person's decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// An `ask_user` call: the question and its answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<QuestionRecord>,
}

/// A person's (or callbackd's) decision on a held call.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Decision {
    pub approval_id: String,
    /// `approved`, `denied`, `expired`, `cancelled`, or `pending` (not decided yet).
    pub decision: String,
    /// Who decided (`namespace/label`, or `callbackd` for a cancellation).
    pub by: Option<String>,
    pub at: Option<String>,
    pub reason: Option<String>,
    /// The tool ran with arguments a person changed (`requested_arguments` has the model's).
    pub edited: bool,
}

/// A question of the model (`ask_user`) and the person's answer.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct QuestionRecord {
    pub question_id: String,
    pub text: String,
    pub options: Vec<String>,
    /// The answer; `null` when the question was not answered (expired, cancelled) or is
    /// still open.
    pub answer: Option<String>,
    pub answered_by: Option<String>,
    pub answered_at: Option<String>,
}

/// callbackd's records of a run beside the bridge's events: its tool calls and approvals.
#[derive(Debug, Clone, Default)]
pub struct Beside {
    pub tool_calls: Vec<ToolCallRecord>,
    pub approvals: Vec<ApprovalRecord>,
}

impl Beside {
    /// The last record of call `id` (a retried call reuses its id).
    pub fn record(&self, id: &str) -> Option<&ToolCallRecord> {
        self.tool_calls
            .iter()
            .rev()
            .find(|r| r.tool_call_id.as_deref() == Some(id))
    }

    pub fn approval(&self, id: &str) -> Option<&ApprovalRecord> {
        self.approvals
            .iter()
            .rev()
            .find(|a| a.tool_call_id.as_deref() == Some(id))
    }
}

/// The outcome a record stands for, refined by its approval's state (records written
/// before `expired` had its own outcome say `denied`).
pub fn outcome_of(r: &ToolCallRecord, approval: Option<&ApprovalRecord>) -> &'static str {
    match (r.outcome, approval.map(|a| a.state.as_str())) {
        (ToolOutcome::Denied, Some("expired")) | (ToolOutcome::Expired, _) => "expired",
        (ToolOutcome::Denied, Some("cancelled")) => "cancelled",
        // The daemon stopped while it ran: cancelled, and cut off.
        (ToolOutcome::Interrupted, _) => "cancelled",
        (o, _) => o.as_str(),
    }
}

/// The execution time callbackd recorded for a call that has ended: `Some(None)` for one that
/// never ran (denied, expired, or cancelled while it was held: its whole time was the wait,
/// which is `waited_ms`), `None` when the record has not ended.
pub fn executed_ms(r: &ToolCallRecord) -> Option<Option<i64>> {
    let end = r.ended_at_ms?;
    // A held call that ends unrun records its wait up to its end (started_at never moved).
    let never_ran = matches!(r.outcome, ToolOutcome::Denied | ToolOutcome::Expired)
        || r.waited_ms.is_some_and(|w| r.started_at_ms + w == end);
    Some((!never_ran).then(|| (end - r.started_at_ms).max(0)))
}

/// The decision and the question of call `id`, from its approval.
pub fn decision_and_question(
    approval: Option<&ApprovalRecord>,
    tool: &str,
) -> (Option<Decision>, Option<QuestionRecord>) {
    let Some(a) = approval else {
        return (None, None);
    };
    if tool == crate::tools::builtin::ask_user::NAME
        || a.tool == crate::tools::builtin::ask_user::NAME
    {
        let answer = (a.state == "approved")
            .then(|| {
                a.approved_args
                    .as_ref()
                    .and_then(|v| v.get("answer"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .flatten();
        let answered = answer.is_some();
        return (
            None,
            Some(QuestionRecord {
                question_id: a.id.clone(),
                text: a
                    .args
                    .get("question")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                options: a
                    .args
                    .get("options")
                    .and_then(Value::as_array)
                    .map(|o| {
                        o.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
                answer,
                answered_by: a.decided_by.clone().filter(|_| answered),
                answered_at: a.decided_at_ms.filter(|_| answered).map(rfc3339_ms),
            }),
        );
    }
    (
        Some(Decision {
            approval_id: a.id.clone(),
            decision: a.state.clone(),
            by: a.decided_by.clone(),
            at: a.decided_at_ms.map(rfc3339_ms),
            reason: a.reason.clone(),
            edited: a.state == "approved" && a.approved_args.is_some(),
        }),
        None,
    )
}

/// What the tool ran with and what the model asked (only when they differ): a person's
/// edit is in the record (or, for calls recorded before migration 0009, the approval).
/// A question's answer is not an edit: its arguments are the model's.
pub fn arguments_of(
    requested: Value,
    record: Option<&ToolCallRecord>,
    approval: Option<&ApprovalRecord>,
    tool: &str,
) -> (Value, Option<Value>) {
    if tool == crate::tools::builtin::ask_user::NAME {
        return (requested, None);
    }
    let ran = record.and_then(|r| r.arguments.clone()).or_else(|| {
        approval
            .filter(|a| a.state == "approved")
            .and_then(|a| a.approved_args.clone())
    });
    match ran {
        Some(ran) if ran != requested => (ran, Some(requested)),
        _ => (requested, None),
    }
}

/// Why a call's effect is unknown: callbackd stopped it mid-execution (its record says how).
pub fn cut_off_reason(r: &ToolCallRecord) -> String {
    format!(
        "callbackd stopped the call mid-execution ({}): its effect is unknown",
        r.outcome.as_str()
    )
}

/// The account of an open call its run's end closes, when callbackd cut it off before that
/// end (its daemon was killed while it ran, and the bridge stored no completion): its effect
/// is unknown, as when the bridge stores the failure; the reason, or `None` for a call that
/// was not cut off. Only a record ended by the run's end (`at_ms`) counts, so that a replay
/// tells what the live stream told.
pub fn close_cut_off(call: &mut ToolCall, beside: &Beside, at_ms: i64) -> Option<String> {
    let r = beside
        .record(&call.tool_call_id)
        .filter(|r| r.cut_off && r.ended_at_ms.is_some_and(|e| e <= at_ms))?;
    call.outcome = outcome_of(r, beside.approval(&call.tool_call_id));
    call.cut_off = true;
    call.ended_at = r.ended_at_ms.map(rfc3339_ms);
    call.duration_ms = executed_ms(r).flatten();
    call.waited_ms = r.waited_ms;
    Some(cut_off_reason(r))
}

/// What the records add to the account of a call the stored events leave open (a snapshot
/// such as the run state may say it; the stream waits for the completion): held for a
/// person (`awaiting`, with the pending decision or question), or ended by callbackd while
/// the bridge has not stored its completion yet.
pub fn overlay_open(call: &mut ToolCall, beside: &Beside) {
    let record = beside.record(&call.tool_call_id);
    let approval = beside.approval(&call.tool_call_id);
    let (decision, question) = decision_and_question(approval, &call.tool);
    call.decision = decision;
    call.question = question;
    let Some(r) = record else { return };
    call.waited_ms = r.waited_ms;
    call.cut_off = r.cut_off;
    match r.outcome {
        ToolOutcome::Awaiting => call.outcome = "awaiting",
        ToolOutcome::Running => {}
        _ => {
            call.outcome = outcome_of(r, approval);
            call.ended_at = r.ended_at_ms.map(rfc3339_ms);
            call.duration_ms = executed_ms(r).flatten();
            // A call that never ran returned nothing: the error its model was told is not a
            // result, and the stream's closing `tool_completed` says null too, whether it was
            // written before or after callbackd recorded that error.
            if let (Some(result), Some(_)) = (&r.result, call.duration_ms) {
                call.result = result.clone();
            }
        }
    }
    let (arguments, requested) = arguments_of(call.arguments.clone(), record, approval, &call.tool);
    call.arguments = arguments;
    call.requested_arguments = requested;
}

/// The account of a recorded call whose stored events are gone (removed by retention) or
/// were never stored: what callbackd's records hold (the model's arguments are in the
/// approval of a held call only).
pub fn from_record(r: &ToolCallRecord, beside: &Beside) -> ToolCall {
    let id = r.tool_call_id.clone().unwrap_or_default();
    let approval = beside.approval(&id);
    let mut call = ToolCall {
        tool_call_id: id,
        tool: r.tool.clone(),
        outcome: "running",
        started_at: rfc3339_ms(r.started_at_ms - r.waited_ms.unwrap_or(0)),
        arguments: approval.map(|a| a.args.clone()).unwrap_or(Value::Null),
        ..Default::default()
    };
    let only = Beside {
        tool_calls: vec![r.clone()],
        approvals: approval.cloned().into_iter().collect(),
    };
    overlay_open(&mut call, &only);
    call
}
