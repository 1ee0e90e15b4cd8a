//! [`Control`]: the stream events that are not stored (no `id:` line, not in a replay):
//! best-effort tokens, the stream's own control events, and what a person is asked and how
//! that ended, sent live while it matters.

use schemars::JsonSchema;
use serde::Serialize;

/// The events that are not stored (no `id:` line): best-effort tokens and the stream's
/// own control events.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Control {
    /// A live text fragment of the assistant message being written.
    Token { text: String, delta: u32 },
    /// The stream ends now (`api.max_stream_ms`, or shutdown): reconnect after `retry_ms`
    /// with `after=after_seq`.
    Reconnect { after_seq: u64, retry_ms: u64 },
    /// A stored event could not be read; the stream ends.
    StreamGap { after_seq: u64, reason: String },
    /// A tool call of this run waits for a person: decide with `POST /v1/approvals/{id}`.
    /// Sent on every (re)connect while it is pending.
    ApprovalRequired {
        approval: Box<crate::approvals::ApprovalView>,
    },
    /// The model asks the person (built-in `ask_user`): answer with
    /// `POST /v1/runs/{run_id}/resume` `{question_id, answer}` (or `callbackd answer`).
    /// Sent on every (re)connect while it is open; its end is a `question_resolved` with its
    /// id (and, durably, the `ask_user` call's `tool_completed` with the question and answer).
    Question { question: QuestionView },
    /// An open question ended: `answered` (with the answer and who gave it), `expired` or
    /// `cancelled` (`reason` says why).
    QuestionResolved {
        question_id: String,
        outcome: String,
        answer: Option<String>,
        by: Option<String>,
        reason: Option<String>,
    },
    /// A pending approval was decided: `approved`, `denied`, `expired` or `cancelled`
    /// (`reason` says why: the run ended, callbackd stopped, ...); `edited` when the tool
    /// runs with arguments a person edited.
    ApprovalResolved {
        approval_id: String,
        decision: String,
        by: Option<String>,
        reason: Option<String>,
        edited: bool,
    },
    /// The replay has caught up; what follows is live.
    UpToDate { last_seq: u64 },
}

/// An open question of the model to the person.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct QuestionView {
    pub id: String,
    /// The `ask_user` call it holds: its `tool_started` row waits for this answer.
    pub tool_call_id: Option<String>,
    pub text: String,
    pub options: Vec<String>,
    pub expires_at: String,
}
