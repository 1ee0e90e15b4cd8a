//! The run stream (run-api.md §2): replay and live follow as one loop. Read every stored
//! event after the position, send it, wait for an append notification (or a short timer),
//! read again. A missed notification costs one re-read, never an event; only a failed read
//! is a `stream_gap`.
//!
//! Each stream is a task that writes SSE frames into a queue bounded in bytes
//! ([`super::pipe`], `api.stream_buffer_bytes`) the response
//! body reads from: a slow reader never holds up appends or other readers (they all read
//! the store themselves), and one that stops taking frames for `api.slow_reader_ms` is
//! dropped, to resume from the store with `after`.

use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{header, HeaderValue, StatusCode};
use serde_json::Value;
use tokio::time::Instant;

use super::control::{Control, QuestionView};
use super::feed::{FeedError, Private, RunCtx};
use super::live_tokens::{Fragment, Relay};
use super::pipe::{self, Writer};
use super::reader::{is_terminal, Reader};
use super::ApiState;
use crate::account::event_json;
use crate::clock::now_ms;
use crate::store::Namespace;

/// Events read per store call.
const PAGE: usize = 256;
/// The fallback re-read when no notification came.
const FALLBACK_READ: Duration = Duration::from_secs(2);
/// A woken follower that wrote less than this long ago waits until it has passed before it
/// reads: under a fast appender it writes once per window instead of once per append (each
/// write is a syscall and a wake-up of the connection), and the appender gets the CPU back
/// sooner. A follower idle for longer (a run appended at a human pace) reads at once.
/// tokio's timer ticks in milliseconds, so the wait ends 1–2 ms after the last write.
const COALESCE: Duration = Duration::from_millis(1);

/// What one stream sends.
pub struct StreamPlan {
    pub ns: Namespace,
    /// Who opened it: the stream ends (its connection closes) once a reload revokes the
    /// caller's token, so a rotated or removed token stops reading at once.
    pub caller: super::Caller,
    pub run_id: String,
    pub run_doc: Value,
    /// Send durable events with a larger seq.
    pub after: u64,
    /// `POST .../messages`: the text fragments the bridge streams, counted.
    pub tokens: Option<Relay>,
    /// The stream's place under `api.max_streams` (and its namespace's share), held until
    /// the stream's task ends (held, never read).
    #[allow(dead_code)]
    pub permit: super::stream_slots::StreamSlot,
    /// The connection's place under `server.max_connections`, given back for the stream.
    pub conn: Option<crate::server::ConnSlot>,
}

/// Starts the stream's task and answers with its body.
pub fn respond(state: ApiState, mut plan: StreamPlan) -> Response {
    if let Some(slot) = &plan.conn {
        slot.release();
    }
    plan.run_doc = slim(&plan.run_doc);
    let (tx, rx) = pipe::pipe(state.config().stream_buffer_bytes);
    tokio::spawn(async move {
        let _open = state.metrics().stream_guard();
        let mut out = Out {
            tx,
            slow: Duration::from_millis(state.config().slow_reader_ms),
            retry: Some(state.config().retry_ms),
            last_sent: Instant::now(),
        };
        let run_id = plan.run_id.clone();
        let caller = plan.caller.clone();
        tokio::select! {
            ended = run(&state, plan, &mut out) => if let Err(Stop) = ended {
                tracing::debug!(%run_id, "stream ended early (reader gone or slow)");
            },
            () = caller.revoked() => {
                tracing::info!(%run_id, namespace = caller.ns.as_str(), "stream closed: its token was revoked by a reload");
            }
        }
    });
    // A reader dropped as too slow gets an error, not a clean end: hyper then closes the
    // connection at once, and what it and the kernel still buffer for the client goes too.
    let body = futures_util::stream::unfold(Some(rx), |rx| async move {
        let rx = rx?;
        match rx.recv().await {
            Some(b) => Some((Ok(b), Some(rx))),
            None if rx.aborted() => Some((Err(SlowReader), None)),
            None => None,
        }
    });
    sse_response(Body::from_stream(body))
}

/// A `text/event-stream` answer of `body` (a run stream, `POST /v1/ag-ui`): not cached or
/// buffered by proxies, and its connection closed at the end (a stream gave its place under
/// `server.max_connections` back: not for reuse).
pub(super) fn sse_response(body: Body) -> Response {
    let mut response = body.into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-transform"),
    );
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    h.insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// The fields of the run document a stream reads: `agentId` and `model` (the session id and
/// model of its events), `status` (whether the run has ended). A stream holds its document
/// for as long as it is open, often hours; the whole one, parsed, was about 2.5 KiB of every
/// open stream's ~25 KiB (valgrind massif, 1,000 open streams).
fn slim(doc: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for key in ["agentId", "model", "status"] {
        if let Some(v) = doc.get(key) {
            out.insert(key.to_string(), v.clone());
        }
    }
    Value::Object(out)
}

/// `204 No Content`: a terminal run with nothing after the position.
pub fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

/// A stream waiting for live appends, as `/metrics` counts it.
struct Following(crate::metrics::Metrics);

impl Following {
    fn start(metrics: &crate::metrics::Metrics) -> Self {
        metrics.follower_started();
        Following(metrics.clone())
    }
}

impl Drop for Following {
    fn drop(&mut self) {
        self.0.follower_stopped();
    }
}

/// The reader went away or was too slow: stop.
struct Stop;

/// The body's error when the stream dropped its reader as too slow.
#[derive(Debug, thiserror::Error)]
#[error("the reader took nothing for api.slow_reader_ms; resume with after")]
struct SlowReader;

struct Out {
    tx: Writer,
    slow: Duration,
    /// `api.retry_ms`, until the first write: every stream starts with an SSE `retry:`
    /// field (in its first block), so a browser's `EventSource` waits that long before it
    /// reconnects, not its own default.
    retry: Option<u64>,
    /// When the last frame was queued: the next keepalive is due `api.keepalive_ms` after
    /// it, however often the wait loop is re-entered meanwhile.
    last_sent: Instant,
}

impl Out {
    async fn frame(&mut self, frame: String) -> Result<(), Stop> {
        self.send(vec![Bytes::from(frame)]).await
    }

    /// Queues `frames` for the reader (the feed's shared bytes: nothing is copied).
    ///
    /// The queue's future (and the feed's, and the last store read's, in [`run`]) is boxed
    /// for the time it runs: an `async fn` reserves room in its own state for every future
    /// it awaits, for as long as it lives, and a stream lives for hours, mostly waiting.
    /// Boxed, a stream's task is 3.0 KiB instead of 3.6 (heaptrack, 100 followers; issue
    /// 39), and the boxes exist only while a wake-up reads or writes: one allocation each,
    /// usually freed before the connection thread runs the next stream.
    async fn send(&mut self, mut frames: Vec<Bytes>) -> Result<(), Stop> {
        if let Some(ms) = self.retry.take() {
            if !frames.first().is_some_and(|f| f.starts_with(b"retry:")) {
                // The field's line joins the first frame's block, as one write would.
                frames.insert(0, Bytes::from(format!("retry: {ms}\n")));
            }
        }
        match Box::pin(self.tx.send_all(frames, self.slow)).await {
            Ok(()) => {
                self.last_sent = Instant::now();
                Ok(())
            }
            Err(_) => Err(Stop),
        }
    }
}

fn control_frame(event: &Control, run_id: &str, seq: u64) -> String {
    format!("data: {}\n\n", event_json(event, seq, run_id, now_ms()))
}

async fn run(state: &ApiState, mut plan: StreamPlan, out: &mut Out) -> Result<(), Stop> {
    let mut relay = plan.tokens.take();
    let plan = &plan;
    let reader = state.reader(&plan.ns);
    let run_id = plan.run_id.as_str();
    let cfg = state.config();
    let started = Instant::now();
    let deadline = started + cfg.max_stream();
    let keepalive = cfg.keepalive();
    let shutdown = state.shutdown_token();
    // Wake-ups first, then the first read: an append between the two is not missed.
    let mut follow = state.hub().follow(&plan.ns, run_id);
    let ctx = RunCtx {
        state,
        ns: &plan.ns,
        run_id,
        run_doc: &plan.run_doc,
    };
    let mut private: Option<Private> = None;
    let mut pos = plan.after;
    // Approvals are state, not events: the pending ones of the run on every (re)connect.
    let mut approvals = state.approvals().subscribe();
    for approval in state.approvals().pending_of_run(&plan.ns, run_id).await {
        out.frame(control_frame(&required_control(approval), run_id, pos))
            .await?;
    }
    // The last seq a notification named since the last store read (`None`: read anyway).
    let mut known: Option<u64> = None;
    let mut up_to_date_sent = false;
    // Counted as a follower (`/metrics`) from up_to_date until the stream ends.
    let mut _following: Option<Following> = None;
    let mut run_doc_terminal = is_terminal(&plan.run_doc);
    // When durable frames last went out (the coalescing window starts there).
    let mut last_write: Option<Instant> = None;
    loop {
        // 1. Everything stored after the position (from the run's shared feed).
        loop {
            // Boxed: see `Out::send`.
            let after = Box::pin(follow.feed.after(&ctx, pos, &mut private, known));
            let frames = match after.await {
                Ok(frames) => frames,
                Err(FeedError::Gap { after_seq, reason }) => {
                    return gap(out, run_id, after_seq.max(pos), &reason).await
                }
            };
            if frames.is_empty() {
                break;
            }
            // Everything available now goes to the reader at once (one wake-up of the
            // connection, written together): the feed's frames as they are, shared by every
            // follower of the run rather than copied into a buffer per stream.
            let mut batch = Vec::with_capacity(frames.len());
            let mut ended = false;
            for frame in frames {
                if let Some(relay) = relay.as_mut() {
                    // The tokens a snapshot replaces go before it, whoever sealed it.
                    for f in relay.before_frame(frame.seq) {
                        batch.push(Bytes::from(token_frame(&f, run_id, pos)));
                    }
                }
                batch.push(frame.bytes);
                pos = frame.seq;
                if frame.terminal {
                    ended = true;
                    break;
                }
            }
            if let (Some(relay), false) = (relay.as_mut(), ended) {
                for f in relay.sendable() {
                    batch.push(Bytes::from(token_frame(&f, run_id, pos)));
                }
            }
            out.send(batch).await?;
            last_write = Some(Instant::now());
            if ended {
                return Ok(());
            }
        }
        // 2. Caught up.
        if !up_to_date_sent {
            if !run_doc_terminal {
                run_doc_terminal = doc_terminal(&reader, run_id).await;
            }
            if run_doc_terminal {
                // Terminal with no terminal event (e.g. cancelled while queued): done.
                return Ok(());
            }
            out.frame(control_frame(
                &Control::UpToDate { last_seq: pos },
                run_id,
                pos,
            ))
            .await?;
            up_to_date_sent = true;
            _following = Some(Following::start(state.metrics()));
        }
        // 3. Wait for an append, a token, a timer. The keepalive is due a whole interval
        // after the last frame sent, not after this wait began: the fallback read ends the
        // wait every 2 s, and a deadline counted from here would never come due.
        let fallback_at = Instant::now() + FALLBACK_READ;
        loop {
            let keepalive_at = out.last_sent + keepalive;
            tokio::select! {
                changed = follow.rx.changed() => {
                    if changed.is_err() {
                        tokio::time::sleep(FALLBACK_READ).await;
                        known = None;
                    } else {
                        if let Some(at) = last_write.map(|w| w + COALESCE) {
                            if Instant::now() < at {
                                // Tokens, approvals and shutdown wait too (≤ 2 ms): what
                                // goes out, and in what order, is as if the read were slow.
                                tokio::time::sleep_until(at).await;
                            }
                        }
                        known = Some(*follow.rx.borrow_and_update());
                    }
                    break;
                }
                () = received(relay.as_ref()) => {
                    if let Some(relay) = relay.as_mut() {
                        for f in relay.sendable() {
                            out.frame(token_frame(&f, run_id, pos)).await?;
                        }
                    }
                }
                () = tokio::time::sleep_until(keepalive_at.min(fallback_at)) => {
                    if Instant::now() >= keepalive_at {
                        out.frame(": keepalive\n\n".into()).await?;
                    }
                    // Re-read as a fallback; also notices a run document turned terminal.
                    if Instant::now() >= fallback_at {
                        known = None;
                        run_doc_terminal = doc_terminal(&reader, run_id).await;
                    }
                    break;
                }
                () = tokio::time::sleep_until(deadline) => {
                    return reconnect(out, state, run_id, pos).await;
                }
                () = shutdown.cancelled() => {
                    return reconnect(out, state, run_id, pos).await;
                }
                // The connection closed (hyper drops the body when it reads the client's
                // end): the slot under api.max_streams is free now, not at the next write.
                () = out.tx.closed() => return Err(Stop),
                event = approvals.recv() => match event {
                    Ok(event) if event.is_for(&plan.ns, run_id) => {
                        out.frame(control_frame(&approval_control(event), run_id, pos)).await?;
                    }
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        for approval in state.approvals().pending_of_run(&plan.ns, run_id).await {
                            out.frame(control_frame(&required_control(approval), run_id, pos))
                                .await?;
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                        approvals = state.approvals().subscribe();
                    }
                },
            }
        }
        if run_doc_terminal {
            // One more read for events stored before the document turned terminal.
            let events = Box::pin(reader.events_after(run_id, pos, PAGE))
                .await
                .unwrap_or_default();
            if events.is_empty() {
                return Ok(());
            }
        }
    }
}

/// Whether the run's document says it has ended (a failed read: not yet).
async fn doc_terminal(reader: &Reader<'_>, run_id: &str) -> bool {
    reader
        .run(run_id)
        .await
        .ok()
        .flatten()
        .is_some_and(|d| is_terminal(&d))
}

/// A held call as the stream shows it: an `ask_user` call is a `question`, any other an
/// `approval_required`.
fn required_control(approval: crate::approvals::ApprovalView) -> Control {
    if approval.tool == crate::tools::builtin::ask_user::NAME {
        return Control::Question {
            question: QuestionView {
                text: approval
                    .args
                    .get("question")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                options: approval
                    .args
                    .get("options")
                    .and_then(serde_json::Value::as_array)
                    .map(|o| {
                        o.iter()
                            .filter_map(|v| v.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default(),
                id: approval.id,
                tool_call_id: approval.tool_call_id,
                expires_at: approval.expires_at,
            },
        };
    }
    Control::ApprovalRequired {
        approval: Box::new(approval),
    }
}

fn approval_control(event: crate::approvals::ApprovalEvent) -> Control {
    match event {
        crate::approvals::ApprovalEvent::Required { approval, .. } => required_control(*approval),
        crate::approvals::ApprovalEvent::Resolved {
            approval_id,
            decision,
            by,
            reason,
            question: Some(answer),
            ..
        } => Control::QuestionResolved {
            question_id: approval_id,
            outcome: if answer.is_some() {
                "answered".into()
            } else {
                decision
            },
            answer,
            by,
            reason,
        },
        crate::approvals::ApprovalEvent::Resolved {
            approval_id,
            decision,
            by,
            reason,
            edited,
            question: None,
            ..
        } => Control::ApprovalResolved {
            approval_id,
            decision,
            by,
            reason,
            edited,
        },
    }
}

/// Resolves when the relay received fragments; never without a relay.
async fn received(relay: Option<&Relay>) {
    match relay {
        Some(relay) => relay.received().await,
        None => std::future::pending().await,
    }
}

/// A `token` event: `seq` is the last durable seq sent before it.
fn token_frame(f: &Fragment, run_id: &str, pos: u64) -> String {
    let token = Control::Token {
        text: f.text.clone(),
        delta: f.delta,
    };
    control_frame(&token, run_id, pos)
}

async fn gap(out: &mut Out, run_id: &str, pos: u64, reason: &str) -> Result<(), Stop> {
    tracing::warn!(run_id, after_seq = pos, reason, "stream_gap");
    let event = Control::StreamGap {
        after_seq: pos,
        reason: reason.to_string(),
    };
    out.frame(control_frame(&event, run_id, pos)).await
}

async fn reconnect(out: &mut Out, state: &ApiState, run_id: &str, pos: u64) -> Result<(), Stop> {
    let retry = state.config().retry_ms;
    let event = Control::Reconnect {
        after_seq: pos,
        retry_ms: retry,
    };
    let frame = control_frame(&event, run_id, pos);
    out.frame(format!("retry: {retry}\n{frame}")).await
}
