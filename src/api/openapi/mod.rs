//! `GET /v1/openapi.json`: an OpenAPI 3.1 document generated from the route table the router
//! is built from ([`ROUTES`]) and the handlers' own types (via `schemars`), so it lists
//! exactly the routes served and the shapes they answer with.

use axum::response::Response;
use axum::routing::{get, post, MethodRouter};

use http::StatusCode;
use schemars::{JsonSchema, Schema, SchemaGenerator};

use super::reader::Session;
use super::runs::{EventPage, RunState};
use super::sessions::{Created, NewSession, RunPage, SessionPage};
mod document;

use super::{
    ag_ui, approvals, fork, forks, json_response, messages, questions, runs, sessions, webhooks,
    ApiState,
};
pub use document::document;

/// `GET`, `PATCH` and `DELETE` of one session (one handler for the three route entries).
fn one_session() -> MethodRouter<ApiState> {
    get(sessions::get_one)
        .patch(super::session_admin::patch)
        .delete(super::session_admin::delete)
}

/// What a route answers with on success.
pub enum Answer {
    Json(u16, fn(&mut SchemaGenerator) -> Schema),
    /// `text/event-stream` of `StreamEvent`s (or 204).
    Stream,
    /// `text/event-stream` of AG-UI 1.0 events (`data: <event JSON>` blocks).
    AgUiStream,
    Accepted,
    /// `204` with no body.
    NoContent(&'static str),
}

/// One route: the router registers it, the document describes it.
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    /// The operation's `operationId` (a generated client's method name).
    pub operation_id: &'static str,
    pub summary: &'static str,
    pub request: Option<fn(&mut SchemaGenerator) -> Schema>,
    pub answer: Answer,
    pub needs_bridge: bool,
    pub write: bool,
    pub handler: fn() -> MethodRouter<ApiState>,
}

fn schema<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

/// Every `/v1` route but the document itself and `/v1/whoami`.
pub const ROUTES: &[Route] = &[
    Route {
        method: "post",
        path: "/v1/sessions",
        operation_id: "createSession",
        summary: "Create a session (an agent on the bridge) with the registry's tools",
        request: Some(schema::<NewSession>),
        answer: Answer::Json(201, schema::<Created>),
        needs_bridge: true,
        write: true,
        handler: || post(sessions::create).get(super::find::sessions),
    },
    Route {
        method: "get",
        path: "/v1/sessions",
        operation_id: "listSessions",
        summary: "Sessions from the store, newest first",
        request: None,
        answer: Answer::Json(200, schema::<SessionPage>),
        needs_bridge: false,
        write: false,
        handler: || post(sessions::create).get(super::find::sessions),
    },
    Route {
        method: "get",
        path: "/v1/sessions/{session_id}",
        operation_id: "getSession",
        summary: "One session",
        request: None,
        answer: Answer::Json(200, schema::<Session>),
        needs_bridge: false,
        write: false,
        handler: one_session,
    },
    Route {
        method: "patch",
        path: "/v1/sessions/{session_id}",
        operation_id: "renameSession",
        summary: "Name a session (`{name}`, 1-200 characters)",
        request: Some(schema::<super::session_admin::SessionPatch>),
        answer: Answer::Json(200, schema::<Session>),
        needs_bridge: false,
        write: true,
        handler: one_session,
    },
    Route {
        method: "delete",
        path: "/v1/sessions/{session_id}",
        operation_id: "deleteSession",
        summary:
            "Delete a session and everything of it, on the bridge too (409 while a run is active)",
        request: None,
        answer: Answer::NoContent("Deleted"),
        needs_bridge: false,
        write: true,
        handler: one_session,
    },
    Route {
        method: "get",
        path: "/v1/runs",
        operation_id: "listRuns",
        summary: "Runs of every session, newest first, by status, session, time and text",
        request: None,
        answer: Answer::Json(200, schema::<RunPage>),
        needs_bridge: false,
        write: false,
        handler: || get(super::find::runs),
    },
    Route {
        method: "get",
        path: "/v1/usage",
        operation_id: "getUsage",
        summary: "Token totals and runs by status, per UTC day or per session",
        request: None,
        answer: Answer::Json(200, schema::<super::find::Usage>),
        needs_bridge: false,
        write: false,
        handler: || get(super::find::usage),
    },
    Route {
        method: "post",
        path: "/v1/sessions/{session_id}/messages",
        operation_id: "sendMessage",
        summary: "Send a message: starts a turn and streams the new run",
        request: Some(schema::<messages::NewMessage>),
        answer: Answer::Stream,
        needs_bridge: true,
        write: true,
        handler: || post(messages::send),
    },
    Route {
        method: "post",
        path: "/v1/ag-ui",
        operation_id: "runAgUi",
        summary: "Run a turn in the Agent-User Interaction protocol (AG-UI 1.0): a thread is a \
                  session; answers one AG-UI run as Server-Sent Events (docs/ag-ui.md)",
        request: Some(schema::<ag_ui::InputDoc>),
        answer: Answer::AgUiStream,
        needs_bridge: true,
        write: true,
        handler: || post(ag_ui::run),
    },
    Route {
        method: "get",
        path: "/v1/sessions/{session_id}/runs",
        operation_id: "listSessionRuns",
        summary: "A session's runs, in turn order",
        request: None,
        answer: Answer::Json(200, schema::<RunPage>),
        needs_bridge: false,
        write: false,
        handler: || get(sessions::runs),
    },
    Route {
        method: "get",
        path: "/v1/runs/{run_id}",
        operation_id: "getRun",
        summary: "A run's state: status, last_seq, usage, output, error, tool calls",
        request: None,
        answer: Answer::Json(200, schema::<RunState>),
        needs_bridge: false,
        write: false,
        handler: || get(runs::get_one),
    },
    Route {
        method: "get",
        path: "/v1/runs/{run_id}/tool_calls/{tool_call_id}",
        operation_id: "getToolCall",
        summary: "One tool call of a run with its whole arguments and result",
        request: None,
        answer: Answer::Json(200, schema::<super::tool_calls::ToolCallDetail>),
        needs_bridge: false,
        write: false,
        handler: || get(super::tool_calls::get_one),
    },
    Route {
        method: "get",
        path: "/v1/runs/{run_id}/stream",
        operation_id: "streamRun",
        summary: "The run's durable events after `after`, then live ones until it ends",
        request: None,
        answer: Answer::Stream,
        needs_bridge: false,
        write: false,
        handler: || get(runs::stream),
    },
    Route {
        method: "get",
        path: "/v1/runs/{run_id}/events",
        operation_id: "listRunEvents",
        summary: "The same durable events as a JSON page",
        request: None,
        answer: Answer::Json(200, schema::<EventPage>),
        needs_bridge: false,
        write: false,
        handler: || get(runs::events),
    },
    Route {
        method: "get",
        path: "/v1/approvals",
        operation_id: "listApprovals",
        summary: "Approvals of held tool calls (`?state=pending`, the default, or `all`)",
        request: None,
        answer: Answer::Json(200, schema::<approvals::ApprovalList>),
        needs_bridge: false,
        write: false,
        handler: || get(approvals::list),
    },
    Route {
        method: "post",
        path: "/v1/runs/{run_id}/resume",
        operation_id: "answerQuestion",
        summary: "Answer the run's open question (`question` event of the built-in ask_user \
                  tool): the answer is the tool's result; 409 when no longer open",
        request: Some(schema::<questions::Answer>),
        answer: Answer::Json(200, schema::<crate::approvals::ApprovalView>),
        needs_bridge: false,
        write: true,
        handler: || post(questions::resume),
    },
    Route {
        method: "get",
        path: "/v1/approvals/{approval_id}",
        operation_id: "getApproval",
        summary: "One approval in any state: what the model asked (`args`), what ran \
                  (`approved_args`), who decided, when and why",
        request: None,
        answer: Answer::Json(200, schema::<crate::approvals::ApprovalView>),
        needs_bridge: false,
        write: false,
        handler: || get(approvals::get_one).post(approvals::decide),
    },
    Route {
        method: "post",
        path: "/v1/approvals/{approval_id}",
        operation_id: "decideApproval",
        summary: "Decide a pending approval: approve (the tool runs, with edited `args` if \
                  given) or deny; 409 when no longer pending",
        request: Some(schema::<approvals::Decision>),
        answer: Answer::Json(200, schema::<crate::approvals::ApprovalView>),
        needs_bridge: false,
        write: true,
        handler: || get(approvals::get_one).post(approvals::decide),
    },
    Route {
        method: "post",
        path: "/v1/runs/{run_id}/stream-token",
        operation_id: "createStreamToken",
        summary: "A short-lived, read-only token for this run's stream only, for a browser's \
                  EventSource: GET /v1/runs/{run_id}/stream?access_token=<token>",
        request: None,
        answer: Answer::Json(200, schema::<runs::StreamToken>),
        needs_bridge: false,
        write: false,
        handler: || post(runs::stream_token),
    },
    Route {
        method: "post",
        path: "/v1/runs/{run_id}/cancel",
        operation_id: "cancelRun",
        summary: "Cancel a run (CancelRun on the bridge); a run no bridge knows (its bridge \
                  is gone) is ended by callbackd itself, `cancelled`",
        request: None,
        answer: Answer::Accepted,
        needs_bridge: false,
        write: true,
        handler: || post(runs::cancel),
    },
    Route {
        method: "post",
        path: "/v1/sessions/{session_id}/fork",
        operation_id: "forkSession",
        summary: "Fork a session after or before one of its finished runs: a new session with \
                  its own copy of that conversation; 409 for a run not ended or blobs missing",
        request: Some(schema::<fork::NewFork>),
        answer: Answer::Json(201, schema::<fork::Forked>),
        needs_bridge: false,
        write: true,
        handler: || post(fork::fork),
    },
    Route {
        method: "get",
        path: "/v1/sessions/{session_id}/forks",
        operation_id: "listSessionForks",
        summary: "The sessions forked from this one (retries included), oldest first",
        request: None,
        answer: Answer::Json(200, schema::<forks::ForkList>),
        needs_bridge: false,
        write: false,
        handler: || get(forks::of_session),
    },
    Route {
        method: "get",
        path: "/v1/runs/{run_id}/forks",
        operation_id: "listRunForks",
        summary: "The sessions forked after or before this run (retries included), oldest first",
        request: None,
        answer: Answer::Json(200, schema::<forks::ForkList>),
        needs_bridge: false,
        write: false,
        handler: || get(forks::of_run),
    },
    Route {
        method: "post",
        path: "/v1/runs/{run_id}/retry",
        operation_id: "retryRun",
        summary: "Fork before a finished run and send its input again (or `text`); streams the \
                  new run, whose session is in the `callbackd-session-id` header",
        request: Some(schema::<fork::Retry>),
        answer: Answer::Stream,
        needs_bridge: true,
        write: true,
        handler: || post(fork::retry),
    },
    Route {
        method: "get",
        path: "/v1/webhooks/deliveries",
        operation_id: "listWebhookDeliveries",
        summary: "The namespace's recent webhook deliveries, newest first, with their attempts \
                  and last answer (`?state=pending|delivered|failed|all`, `?limit=`)",
        request: None,
        answer: Answer::Json(200, schema::<webhooks::DeliveryList>),
        needs_bridge: false,
        write: false,
        handler: || get(webhooks::list),
    },
];

impl Route {
    fn answer_streams(&self) -> bool {
        matches!(self.answer, Answer::Stream | Answer::AgUiStream)
    }
}

/// The paths the router registers (a path with two methods is listed twice in [`ROUTES`]).
pub fn paths() -> Vec<&'static str> {
    let mut paths: Vec<&str> = ROUTES.iter().map(|r| r.path).collect();
    paths.dedup();
    paths
}

pub async fn serve() -> Response {
    json_response(StatusCode::OK, &document())
}
