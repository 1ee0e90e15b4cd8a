//! The run API (`/v1`, run-api.md): sessions, messages and resumable run streams over HTTP
//! and Server-Sent Events, for the people and programs that use agents.
//!
//! Reads (sessions, runs, events, streams) come from the store through the [`Store`] trait
//! and work without a bridge, for runs of any client of the bridge. Writes (new sessions,
//! messages, cancel) drive the attached bridge ([`BridgeSlot`]).
//!
//! Which runtime: handlers and stream tasks run on the connection's thread (the
//! single-threaded runtimes of `server::ConnThreads`); everything they await is a store
//! call (brief) or network I/O. The follow hub's forwarding task and retention run on the
//! main runtime, started by `App::run_until`.

mod ag_ui;
mod approvals;
mod bridge;
mod caller;
mod control;
mod cors;
mod feed;
mod find;
mod fork;
mod forks;
mod hub;
mod live_tokens;
mod messages;
mod new_run;
pub mod openapi;
mod pipe;
mod problem;
mod prompt;
mod questions;
pub(crate) mod reader;
pub mod retention;
mod runs;
mod schema;
mod sending;
mod session_admin;
mod sessions;
mod stream;
mod stream_slots;
mod stream_token;
mod tool_calls;
mod webhooks;

pub use caller::{ApiTokens, Caller, Role};
pub use problem::{Problem, ProblemCode};

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use axum::extract::{FromRequest, Request};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use http::{header, HeaderValue, StatusCode};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::bridge::{BridgeSlot, Bridges};
use crate::config::ApiConfig;
use crate::store::{RunRecords, Store};
use crate::tools::service::ToolService;
use hub::FollowHub;
use live_tokens::LiveTokens;

/// What an [`ApiState`] is made of.
pub struct ApiParts {
    pub store: Arc<dyn Store>,
    pub records: Arc<dyn RunRecords>,
    pub config: ApiConfig,
    pub tokens: ApiTokens,
    pub bridges: Bridges,
    pub namespaces: crate::namespaces::Namespaces,
    pub tools: ToolService,
    pub metrics: crate::metrics::Metrics,
    pub approvals: crate::approvals::Approvals,
    /// The namespaces' quotas, for the sessions the API writes itself (forks).
    pub quotas: crate::namespaces::quota::QuotaGate,
}

/// What the API's handlers share. Cheap to clone.
#[derive(Clone)]
pub struct ApiState {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn Store>,
    records: Arc<dyn RunRecords>,
    config: ApiConfig,
    tokens: ApiTokens,
    bridges: Bridges,
    namespaces: crate::namespaces::Namespaces,
    tools: ToolService,
    metrics: crate::metrics::Metrics,
    approvals: crate::approvals::Approvals,
    quotas: crate::namespaces::quota::QuotaGate,
    streams: stream_slots::StreamSlots,
    live: LiveTokens,
    sending: sending::Sending,
    hub: OnceLock<FollowHub>,
    shutdown: CancellationToken,
    /// Set by [`ApiState::begin_stop`]: no new turn starts.
    stopping: std::sync::atomic::AtomicBool,
    /// The tools each session was created with, so a resume after a bridge restart declares
    /// the same ones (sessions created elsewhere, or before a daemon restart, get every
    /// enabled tool of the registry).
    session_tools: Mutex<HashMap<(crate::store::Namespace, String), Vec<String>>>,
    /// Where interrupted AG-UI runs stopped, for the runs that resume them.
    ag_ui_held: ag_ui::HeldRuns,
}

impl ApiState {
    pub fn new(parts: ApiParts) -> Self {
        let ApiParts {
            store,
            records,
            config,
            tokens,
            bridges,
            namespaces,
            tools,
            metrics,
            approvals,
            quotas,
        } = parts;
        let streams =
            stream_slots::StreamSlots::new(config.max_streams, config.max_streams_per_namespace);
        ApiState {
            inner: Arc::new(Inner {
                store,
                records,
                config,
                tokens,
                bridges,
                namespaces,
                tools,
                metrics,
                approvals,
                quotas,
                streams,
                live: LiveTokens::default(),
                sending: sending::Sending::default(),
                hub: OnceLock::new(),
                shutdown: CancellationToken::new(),
                stopping: Default::default(),
                session_tools: Mutex::default(),
                ag_ui_held: ag_ui::HeldRuns::default(),
            }),
        }
    }

    /// Starts the follow hub on the current runtime (`App::run_until`); streams opened
    /// before that start it on theirs.
    pub fn start(&self) {
        self.hub();
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// The API's view of the store for namespace `ns`.
    fn reader<'a>(&'a self, ns: &'a crate::store::Namespace) -> reader::Reader<'a> {
        reader::Reader {
            store: self.inner.store.as_ref(),
            records: self.inner.records.as_ref(),
            ns,
        }
    }

    pub fn records(&self) -> &Arc<dyn RunRecords> {
        &self.inner.records
    }

    pub fn config(&self) -> &ApiConfig {
        &self.inner.config
    }

    pub fn tokens(&self) -> &ApiTokens {
        &self.inner.tokens
    }

    /// The bridge of namespace `ns`.
    pub fn bridge(&self, ns: &crate::store::Namespace) -> BridgeSlot {
        self.inner.bridges.slot(ns)
    }

    /// The namespaces in force (tool allowlists).
    pub fn namespaces(&self) -> &crate::namespaces::Namespaces {
        &self.inner.namespaces
    }

    pub fn tools(&self) -> &ToolService {
        &self.inner.tools
    }

    /// Held tool calls and their decisions.
    pub fn approvals(&self) -> &crate::approvals::Approvals {
        &self.inner.approvals
    }

    /// What ends a run no bridge will finish (see `bridge::RunEnder`).
    pub(crate) fn ender(&self) -> crate::bridge::RunEnder {
        crate::bridge::RunEnder {
            store: self.inner.store.clone(),
            records: self.inner.records.clone(),
            approvals: self.inner.approvals.clone(),
        }
    }

    /// The namespaces' quotas (a fork is a new session like any other).
    pub fn quotas(&self) -> &crate::namespaces::quota::QuotaGate {
        &self.inner.quotas
    }

    /// Where streams and retention are counted (`GET /metrics`).
    pub fn metrics(&self) -> &crate::metrics::Metrics {
        &self.inner.metrics
    }

    fn ag_ui_held(&self) -> &ag_ui::HeldRuns {
        &self.inner.ag_ui_held
    }

    fn live_tokens(&self) -> &LiveTokens {
        &self.inner.live
    }

    fn sending(&self) -> &sending::Sending {
        &self.inner.sending
    }

    fn hub(&self) -> &FollowHub {
        self.inner
            .hub
            .get_or_init(|| FollowHub::start(self.inner.store.as_ref()))
    }

    fn shutdown_token(&self) -> &CancellationToken {
        &self.inner.shutdown
    }

    /// The first step of a stop, before the bridge is told to stop: no new turn starts
    /// (`POST .../messages` answers 503), and every held call is cancelled for `reason`, as
    /// is any call held from now on, so the bridge's tool calls return and it can stop.
    /// Idempotent; returns how many held calls this cancelled.
    pub async fn begin_stop(&self, reason: &str) -> usize {
        self.inner
            .stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let n = self.inner.approvals.stop(reason).await;
        if n > 0 {
            tracing::info!(approvals = n, "held tool calls were cancelled: {reason}");
        }
        n
    }

    /// Whether [`begin_stop`](Self::begin_stop) was called.
    fn stopping(&self) -> bool {
        self.inner
            .stopping
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Ends every open stream with `reconnect` (on shutdown: they do not hold the drain).
    pub fn close_streams(&self) {
        self.inner.shutdown.cancel();
    }

    /// Open streams now.
    pub fn open_streams(&self) -> usize {
        self.inner.streams.open()
    }

    /// A place for a stream of `ns` under `api.max_streams` and the namespace's share.
    fn stream_slot(
        &self,
        ns: &crate::store::Namespace,
    ) -> Result<stream_slots::StreamSlot, Problem> {
        let namespaces = self.inner.namespaces.table().names().len();
        self.inner.streams.take(ns, namespaces).map_err(|full| {
            let detail = match full {
                stream_slots::Full::Total(max) => format!(
                    "{max} streams are open, the most api.max_streams allows; close one or retry later"
                ),
                stream_slots::Full::Namespace(share) => format!(
                    "namespace {} has {share} streams open, its share of api.max_streams \
                     (api.max_streams_per_namespace); close one or retry later",
                    ns.as_str()
                ),
            };
            Problem::new(ProblemCode::ResourceExhausted, detail)
        })
    }

    fn remember_tools(&self, ns: &crate::store::Namespace, session: &str, tools: Vec<String>) {
        self.inner
            .session_tools
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((ns.clone(), session.to_string()), tools);
    }

    fn tools_of(&self, ns: &crate::store::Namespace, session: &str) -> Option<Vec<String>> {
        self.inner
            .session_tools
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(ns.clone(), session.to_string()))
            .cloned()
    }
}

/// The `/v1` routes, and what the OpenAPI document lists (one table, so they cannot drift).
pub fn router(state: ApiState) -> Router {
    let mut router = Router::new();
    let mut seen = std::collections::HashSet::new();
    for route in openapi::ROUTES {
        // A path with two methods has two entries with the same (combined) handler.
        if seen.insert(route.path) {
            router = router.route(route.path, (route.handler)());
        }
    }
    router
        .route("/v1/whoami", get(whoami))
        .route("/v1/openapi.json", get(openapi::serve))
        .route("/v1/{*rest}", get(unknown).post(unknown))
        .method_not_allowed_fallback(wrong_method)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            cors::cors,
        ))
        .with_state(state)
}

async fn whoami(caller: Caller) -> Response {
    json_response(
        StatusCode::OK,
        &json!({"namespace": caller.ns.as_str(), "role": caller.role.as_str()}),
    )
}

/// A JSON answer.
pub fn json_response(status: StatusCode, body: &impl Serialize) -> Response {
    let text = serde_json::to_string(body).unwrap_or_else(|_| "{}".into());
    let mut response = (status, text).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The query string's parameters (percent-decoded; the last of a repeated name wins).
pub fn query(uri: &http::Uri) -> Result<HashMap<String, String>, Problem> {
    let mut out = HashMap::new();
    for pair in uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        out.insert(percent_decode(k)?, percent_decode(v)?);
    }
    Ok(out)
}

/// A query key or value decoded (`crate::percent::decode_query`), or a problem naming it.
fn percent_decode(s: &str) -> Result<String, Problem> {
    crate::percent::decode_query(s).ok_or_else(|| {
        Problem::invalid(format!("the query string has a malformed escape in {s:?}"))
    })
}

async fn wrong_method(method: http::Method, uri: http::Uri) -> Problem {
    Problem::new(
        ProblemCode::MethodNotAllowed,
        format!(
            "{method} is not supported for {}; GET /v1/openapi.json lists each endpoint's methods",
            uri.path()
        ),
    )
}

async fn unknown(uri: http::Uri) -> Problem {
    Problem::not_found(format!(
        "no run API endpoint at {}; GET /v1/openapi.json lists them",
        uri.path()
    ))
}

/// A JSON request body, refused with a problem (not axum's plain-text rejection) when it is
/// not JSON, not the expected shape, or larger than `api.max_body_bytes`.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned> FromRequest<ApiState> for ApiJson<T> {
    type Rejection = Problem;

    async fn from_request(req: Request, state: &ApiState) -> Result<Self, Problem> {
        let limit = state.config().max_body_bytes;
        let req = req.map(|b| axum::body::Body::new(http_body_util::Limited::new(b, limit)));
        let bytes = axum::body::Bytes::from_request(req, &())
            .await
            .map_err(|e| {
                if e.status() == StatusCode::PAYLOAD_TOO_LARGE
                    || e.to_string().contains("length limit")
                {
                    Problem::new(
                        ProblemCode::PayloadTooLarge,
                        format!(
                            "the request body is larger than api.max_body_bytes ({limit} bytes)"
                        ),
                    )
                } else {
                    Problem::invalid(format!("cannot read the request body: {e}"))
                }
            })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            // Judged before anything else the request needs (the bridge): bad input is 400.
            return Err(Problem::invalid(
                "the request body is empty: send a JSON object (`{}` for every default)",
            ));
        }
        serde_json::from_slice(&bytes).map(ApiJson).map_err(|e| {
            Problem::invalid(format!(
                "the request body is not the JSON this endpoint takes: {e}"
            ))
        })
    }
}

/// `?after=` and `Last-Event-ID`: the larger wins (an `EventSource` reconnects to its
/// original URL and adds the header).
fn position(after: Option<&str>, headers: &http::HeaderMap) -> Result<u64, Problem> {
    let parse = |what: &str, v: &str| {
        v.trim().parse::<u64>().map_err(|_| {
            Problem::invalid(format!(
                "{what} must be a non-negative integer (a durable seq), not {v:?}"
            ))
        })
    };
    let a = after.map(|v| parse("after", v)).transpose()?;
    let h = match headers.get("last-event-id") {
        Some(v) => Some(parse(
            "Last-Event-ID",
            v.to_str()
                .map_err(|_| Problem::invalid("Last-Event-ID is not text"))?,
        )?),
        None => None,
    };
    Ok(a.unwrap_or(0).max(h.unwrap_or(0)))
}

/// `?limit=`: 1..=1000, `default` when absent.
fn limit(v: Option<&str>, default: usize) -> Result<usize, Problem> {
    match v {
        None => Ok(default),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if (1..=1000).contains(&n) => Ok(n),
            _ => Err(Problem::invalid(format!(
                "limit must be an integer from 1 to 1000, not {v:?}"
            ))),
        },
    }
}
