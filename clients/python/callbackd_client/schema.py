"""The run API's types, generated from callbackd's /v1/openapi.json by gen_types.py.

Do not edit: regenerate with `python gen_types.py <daemon URL>`.
"""
from __future__ import annotations

from typing import Any, Literal, NotRequired, Optional, TypedDict, Union


class AgUiRunAgentInput(TypedDict):
    """The `RunAgentInput` as the OpenAPI document describes it (the AG-UI 1.0 schema's shape;
[`RunAgentInput::parse`] is what checks it)."""
    context: NotRequired[Optional[list[dict[str, Any]]]]
    forwardedProps: NotRequired[Any]
    messages: list[dict[str, Any]]
    parentRunId: NotRequired[Optional[str]]
    protocolVersion: NotRequired[Optional[str]]
    resume: NotRequired[Optional[list[dict[str, Any]]]]
    runId: str
    state: NotRequired[Optional[dict[str, Any]]]
    threadId: str
    tools: NotRequired[Optional[list[dict[str, Any]]]]


class AgentRef(TypedDict):
    """The agent of a `run_started` event."""
    id: str
    model: NotRequired[Optional[str]]


class Answer(TypedDict):
    """`POST /v1/runs/{run_id}/resume` body."""
    answer: str
    question_id: str


class ApprovalList(TypedDict):
    """`GET /v1/approvals` answer."""
    approvals: list[ApprovalView]


class ApprovalView(TypedDict):
    """An approval as the API and the stream show it."""
    approved_args: NotRequired[Any]
    args: dict[str, Any]
    confirm: bool
    created_at: str
    decided_at: NotRequired[Optional[str]]
    decided_by: NotRequired[Optional[str]]
    edited: bool
    expires_at: str
    id: str
    reason: NotRequired[Optional[str]]
    run_id: NotRequired[Optional[str]]
    session_id: str
    state: str
    tool: str
    tool_call_id: NotRequired[Optional[str]]


class Created(TypedDict):
    """`201` answer of `POST /v1/sessions`."""
    session: Session
    tools: list[str]


class Decision(TypedDict):
    """A person's (or callbackd's) decision on a held call."""
    approval_id: str
    at: NotRequired[Optional[str]]
    by: NotRequired[Optional[str]]
    decision: str
    edited: bool
    reason: NotRequired[Optional[str]]


class Decision2(TypedDict):
    """`POST /v1/approvals/{id}` body."""
    args: NotRequired[Any]
    decision: Verdict
    reason: NotRequired[Optional[str]]


class DeliveryList(TypedDict):
    """Deliveries, newest first."""
    deliveries: list[DeliveryView]


class DeliveryView(TypedDict):
    """One event sent to one endpoint."""
    attempts: int
    created_at: str
    id: str
    last_attempt_at: NotRequired[Optional[str]]
    last_error: NotRequired[Optional[str]]
    last_status: NotRequired[Optional[int]]
    next_attempt_at: NotRequired[Optional[str]]
    payload: Any
    run_id: NotRequired[Optional[str]]
    state: str
    type: str
    url: str


class EventPage(TypedDict):
    """A page of events."""
    events: list[StreamEvent]
    next_after: NotRequired[Optional[int]]


class ForkList(TypedDict):
    """The forks of a session or of a run, oldest first."""
    forks: list[ForkSummary]


class ForkSummary(TypedDict):
    """A session forked from another."""
    created_at: str
    forked_from: ForkedFrom
    model: str
    name: NotRequired[Optional[str]]
    retry: bool
    session_id: str


class Forked(TypedDict):
    """`201` answer of `POST /v1/sessions/{session_id}/fork`."""
    blobs_copied: int
    session: Session
    tools: list[str]


class ForkedFrom(TypedDict):
    """Where a forked session came from."""
    at: str
    run_id: str
    session_id: str


class NewFork(TypedDict):
    """`POST /v1/sessions/{session_id}/fork` body."""
    at: str
    name: NotRequired[Optional[str]]
    run_id: str


class NewMessage(TypedDict):
    """`POST .../messages` body."""
    text: str


class NewSession(TypedDict):
    """`POST /v1/sessions` body."""
    cwd: NotRequired[Optional[str]]
    model: NotRequired[Optional[str]]
    name: NotRequired[Optional[str]]
    tools: NotRequired[Optional[list[str]]]


class PlanItem(TypedDict):
    """An item of a `plan` event."""
    status: str
    title: str


class Problem(TypedDict):
    """A problem document. Also the `problem` of an `error` stream event."""
    code: ProblemCode
    detail: str
    status: int
    title: str
    type: str


class QuestionRecord(TypedDict):
    """A question of the model (`ask_user`) and the person's answer."""
    answer: NotRequired[Optional[str]]
    answered_at: NotRequired[Optional[str]]
    answered_by: NotRequired[Optional[str]]
    options: list[str]
    question_id: str
    text: str


class QuestionView(TypedDict):
    """An open question of the model to the person."""
    expires_at: str
    id: str
    options: list[str]
    text: str
    tool_call_id: NotRequired[Optional[str]]


class Retry(TypedDict):
    """`POST /v1/runs/{run_id}/retry` body."""
    text: NotRequired[Optional[str]]


class RunInput(TypedDict):
    """What a run was asked: the user message that started it."""
    text: str
    truncated: NotRequired[bool]


class RunPage(TypedDict):
    """A page of runs."""
    next_cursor: NotRequired[Optional[str]]
    runs: list[RunSummary]


class RunState(TypedDict):
    """`GET /v1/runs/{run_id}`."""
    created_at: NotRequired[Optional[str]]
    ended_at: NotRequired[Optional[str]]
    error: NotRequired[Optional[Problem]]
    events_expired_through: int
    input: NotRequired[Optional[RunInput]]
    last_seq: int
    model: NotRequired[Optional[str]]
    output: NotRequired[Optional[str]]
    run_id: str
    session_id: str
    started_at: NotRequired[Optional[str]]
    status: RunStatus
    tool_calls: list[ToolCall]
    turn_number: NotRequired[Optional[int]]
    usage: NotRequired[Optional[Usage]]


class RunSummary(TypedDict):
    """A run, as the API shows it."""
    created_at: NotRequired[Optional[str]]
    ended_at: NotRequired[Optional[str]]
    error: NotRequired[Optional[Problem]]
    input: NotRequired[Optional[RunInput]]
    last_seq: int
    model: NotRequired[Optional[str]]
    output: NotRequired[Optional[str]]
    run_id: str
    session_id: str
    started_at: NotRequired[Optional[str]]
    status: RunStatus
    turn_number: NotRequired[Optional[int]]
    usage: NotRequired[Optional[Usage]]


class Session(TypedDict):
    """A session (an agent), as the API shows it."""
    active_run_id: NotRequired[Optional[str]]
    created_at: NotRequired[Optional[str]]
    cwd: NotRequired[Optional[str]]
    forked_from: NotRequired[Optional[ForkedFrom]]
    model: NotRequired[Optional[str]]
    name: NotRequired[Optional[str]]
    session_id: str
    status: NotRequired[Optional[SessionStatus]]
    updated_at: NotRequired[Optional[str]]


class SessionPage(TypedDict):
    """A page of sessions."""
    next_cursor: NotRequired[Optional[str]]
    sessions: list[Session]


class SessionPatch(TypedDict):
    """`PATCH /v1/sessions/{session_id}` body."""
    name: str


class RunStartedEvent(TypedDict):
    agent: AgentRef
    at: str
    input: NotRequired[Optional[RunInput]]
    release_id: NotRequired[Optional[str]]
    run_id: str
    seq: int
    session_id: str
    type: Literal["run_started"]


class StepEvent(TypedDict):
    at: str
    index: int
    kind: str
    run_id: str
    seq: int
    status: NotRequired[Optional[str]]
    text: NotRequired[Optional[str]]
    type: Literal["step"]


class MessageSnapshotEvent(TypedDict):
    at: str
    attempt: int
    delta: int
    message_id: str
    run_id: str
    seq: int
    text: str
    type: Literal["message_snapshot"]


class ToolStartedEvent(TypedDict):
    arguments: Any
    at: str
    run_id: str
    seq: int
    tool: str
    tool_call_id: str
    truncated: NotRequired[bool]
    type: Literal["tool_started"]


class PlanEvent(TypedDict):
    """The agent's plan (the built-in `update_plan` tool's call): every item, replacing the
previous plan. It stands for that call's `tool_started`."""
    at: str
    items: list[PlanItem]
    run_id: str
    seq: int
    tool_call_id: str
    type: Literal["plan"]


class ToolCompletedEvent(TypedDict):
    """How a tool call ended, as every view tells it (see [`ToolCall`]). A call still open
when its run ended gets one (`cancelled`) just before the run's terminal event, with
that event's seq."""
    arguments: NotRequired[Optional[dict[str, Any]]]
    at: str
    decision: NotRequired[Optional[Decision]]
    duration_ms: NotRequired[Optional[int]]
    outcome: str
    question: NotRequired[Optional[QuestionRecord]]
    requested_arguments: NotRequired[Optional[dict[str, Any]]]
    result: Any
    run_id: str
    seq: int
    tool: str
    tool_call_id: str
    truncated: NotRequired[bool]
    type: Literal["tool_completed"]
    waited_ms: NotRequired[Optional[int]]


class ToolOutcomeUnknownEvent(TypedDict):
    at: str
    reason: str
    run_id: str
    seq: int
    tool: str
    tool_call_id: str
    type: Literal["tool_outcome_unknown"]


class TaskEvent(TypedDict):
    at: str
    progress: NotRequired[Optional[Scalar]]
    run_id: str
    seq: int
    status: NotRequired[Optional[Scalar]]
    task_id: NotRequired[Optional[Scalar]]
    title: NotRequired[Optional[str]]
    type: Literal["task"]


class UsageEvent(TypedDict):
    at: str
    run_id: str
    seq: int
    type: Literal["usage"]
    usage: NotRequired[Optional[Usage]]


class CompletedEvent(TypedDict):
    at: str
    output: NotRequired[Optional[str]]
    run_id: str
    seq: int
    status: str
    type: Literal["completed"]
    usage: NotRequired[Optional[Usage]]


class ErrorEvent(TypedDict):
    at: str
    problem: Problem
    run_id: str
    seq: int
    status: str
    type: Literal["error"]
    usage: NotRequired[Optional[Usage]]


class SdkMessageEvent(TypedDict):
    at: str
    message: dict[str, Any]
    run_id: str
    seq: int
    type: Literal["sdk_message"]


class TokenEvent(TypedDict):
    """A live text fragment of the assistant message being written."""
    at: str
    delta: int
    run_id: str
    seq: int
    text: str
    type: Literal["token"]


class ReconnectEvent(TypedDict):
    """The stream ends now (`api.max_stream_ms`, or shutdown): reconnect after `retry_ms`
with `after=after_seq`."""
    after_seq: int
    at: str
    retry_ms: int
    run_id: str
    seq: int
    type: Literal["reconnect"]


class StreamGapEvent(TypedDict):
    """A stored event could not be read; the stream ends."""
    after_seq: int
    at: str
    reason: str
    run_id: str
    seq: int
    type: Literal["stream_gap"]


class ApprovalRequiredEvent(TypedDict):
    """A tool call of this run waits for a person: decide with `POST /v1/approvals/{id}`.
Sent on every (re)connect while it is pending."""
    approval: ApprovalView
    at: str
    run_id: str
    seq: int
    type: Literal["approval_required"]


class QuestionEvent(TypedDict):
    """The model asks the person (built-in `ask_user`): answer with
`POST /v1/runs/{run_id}/resume` `{question_id, answer}` (or `callbackd answer`).
Sent on every (re)connect while it is open; its end is a `question_resolved` with its
id (and, durably, the `ask_user` call's `tool_completed` with the question and answer)."""
    at: str
    question: QuestionView
    run_id: str
    seq: int
    type: Literal["question"]


class QuestionResolvedEvent(TypedDict):
    """An open question ended: `answered` (with the answer and who gave it), `expired` or
`cancelled` (`reason` says why)."""
    answer: NotRequired[Optional[str]]
    at: str
    by: NotRequired[Optional[str]]
    outcome: str
    question_id: str
    reason: NotRequired[Optional[str]]
    run_id: str
    seq: int
    type: Literal["question_resolved"]


class ApprovalResolvedEvent(TypedDict):
    """A pending approval was decided: `approved`, `denied`, `expired` or `cancelled`
(`reason` says why: the run ended, callbackd stopped, ...); `edited` when the tool
runs with arguments a person edited."""
    approval_id: str
    at: str
    by: NotRequired[Optional[str]]
    decision: str
    edited: bool
    reason: NotRequired[Optional[str]]
    run_id: str
    seq: int
    type: Literal["approval_resolved"]


class UpToDateEvent(TypedDict):
    """The replay has caught up; what follows is live."""
    at: str
    last_seq: int
    run_id: str
    seq: int
    type: Literal["up_to_date"]


class StreamToken(TypedDict):
    """`POST /v1/runs/{run_id}/stream-token`: a short-lived, read-only credential for this run's
stream, for a browser's `EventSource` (which cannot send headers)."""
    expires_at: str
    token: str


class Tokens(TypedDict):
    """Token totals (the runs' `usage`; a run without usage adds nothing)."""
    cache_read: int
    cache_write: int
    input: int
    output: int


class ToolCall(TypedDict):
    """One tool call of a run, as every view tells it."""
    arguments: NotRequired[Optional[dict[str, Any]]]
    cut_off: bool
    decision: NotRequired[Optional[Decision]]
    duration_ms: NotRequired[Optional[int]]
    ended_at: NotRequired[Optional[str]]
    outcome: str
    question: NotRequired[Optional[QuestionRecord]]
    requested_arguments: NotRequired[Optional[dict[str, Any]]]
    result: Any
    started_at: str
    tool: str
    tool_call_id: str
    waited_ms: NotRequired[Optional[int]]


class ToolCallDetail(TypedDict):
    """A tool call in full."""
    arguments: NotRequired[Optional[dict[str, Any]]]
    cut_off: bool
    decision: NotRequired[Optional[Decision]]
    duration_ms: NotRequired[Optional[int]]
    ended_at: NotRequired[Optional[str]]
    outcome: str
    question: NotRequired[Optional[QuestionRecord]]
    raw_result: Any
    requested_arguments: NotRequired[Optional[dict[str, Any]]]
    result: Any
    run_id: str
    started_at: str
    status: str
    tool: str
    tool_call_id: str
    waited_ms: NotRequired[Optional[int]]


class Usage(TypedDict):
    """Token counts of a run (the bridge's `usage`; more counts may appear)."""
    cacheReadTokens: NotRequired[Optional[int]]
    cacheWriteTokens: NotRequired[Optional[int]]
    inputTokens: NotRequired[Optional[int]]
    outputTokens: NotRequired[Optional[int]]
    totalTokens: NotRequired[Optional[int]]


class Usage2(TypedDict):
    """`GET /v1/usage`."""
    group_by: str
    groups: list[UsageGroup]
    since: str
    total: UsageGroup
    until: str


class UsageGroup(TypedDict):
    """One group of `GET /v1/usage`: a UTC day or a session."""
    key: str
    name: NotRequired[Optional[str]]
    runs: int
    runs_by_status: dict[str, int]
    tokens: Tokens


ProblemCode = Union[Literal["unauthenticated", "permission_denied", "not_found", "invalid_argument", "replay_expired", "not_implemented", "unavailable", "internal"], Literal["method_not_allowed"], Literal["failed_precondition"], Literal["payload_too_large"], Literal["resource_exhausted"]]


RunStatus = Literal["queued", "running", "finished", "error", "cancelled", "expired"]


Scalar = Union[str, float, bool]


SessionStatus = Literal["idle", "running", "error", "archived"]


StreamEvent = Union[
    RunStartedEvent,
    StepEvent,
    MessageSnapshotEvent,
    ToolStartedEvent,
    PlanEvent,
    ToolCompletedEvent,
    ToolOutcomeUnknownEvent,
    TaskEvent,
    UsageEvent,
    CompletedEvent,
    ErrorEvent,
    SdkMessageEvent,
    TokenEvent,
    ReconnectEvent,
    StreamGapEvent,
    ApprovalRequiredEvent,
    QuestionEvent,
    QuestionResolvedEvent,
    ApprovalResolvedEvent,
    UpToDateEvent,
]


Verdict = Literal["approve", "deny"]
