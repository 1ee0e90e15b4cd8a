//! One AG-UI run over a Cursor run: `RUN_STARTED`, then the run's stored events after a
//! position mapped to AG-UI ([`super::mapper`]), live, until the Cursor run ends
//! (`RUN_FINISHED` / `RUN_ERROR`) or waits on a person (`RUN_FINISHED` with the interrupt
//! outcome, or success with `pendingToolCallIds` for frontend tool calls; the Cursor run
//! keeps the calls held). Like the run stream, it reads the store
//! after every append notification (or a fallback timer), so nothing stored is missed.
//! Assistant text goes out per message, whole, when the bridge stores it (the run API's
//! `token` events are best-effort and never replace a stored message).

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::super::feed::{FeedError, RunCtx};
use super::super::reader::is_terminal;
use super::super::ApiState;
use super::event::{AgUiEvent, PROTOCOL_VERSION};
use super::held::Stopped;
use super::mapper::{AgUiMapper, Mapped};
use crate::run::RunStatus;
use crate::store::Namespace;

/// The fallback re-read when no notification came.
const FALLBACK_READ: Duration = Duration::from_secs(2);
/// Frames buffered before the reader counts as slow.
const FRAMES: usize = 64;

/// What one AG-UI run sends.
pub struct Plan {
    pub ns: Namespace,
    /// Who opened it: the stream ends (its connection closes) once a reload revokes the
    /// caller's token, as the run stream does.
    pub caller: super::super::Caller,
    pub run_doc: Value,
    /// Map the Cursor run's events after this seq.
    pub after: u64,
    pub mapper: AgUiMapper,
    /// The stream's place under `api.max_streams`, held until it ends.
    pub permit: super::super::stream_slots::StreamSlot,
}

/// The reader went away or was too slow.
struct Stop;

struct Out {
    tx: mpsc::Sender<Bytes>,
    slow: Duration,
}

impl Out {
    async fn send(&self, events: &[AgUiEvent]) -> Result<(), Stop> {
        if events.is_empty() {
            return Ok(());
        }
        let text: String = events.iter().map(AgUiEvent::frame).collect();
        self.raw(text).await
    }

    async fn raw(&self, text: String) -> Result<(), Stop> {
        self.tx
            .send_timeout(Bytes::from(text), self.slow)
            .await
            .map_err(|_| Stop)
    }
}

/// Starts the AG-UI run's task and answers with its `text/event-stream` body.
pub fn respond(state: ApiState, plan: Plan, conn: Option<&crate::server::ConnSlot>) -> Response {
    if let Some(slot) = conn {
        slot.release();
    }
    let (tx, mut rx) = mpsc::channel::<Bytes>(FRAMES);
    tokio::spawn(async move {
        let _open = state.metrics().stream_guard();
        let out = Out {
            tx,
            slow: Duration::from_millis(state.config().slow_reader_ms),
        };
        let run = plan.mapper.cursor_run.clone();
        let caller = plan.caller.clone();
        tokio::select! {
            ended = run_one(&state, plan, &out) => if ended.is_err() {
                tracing::debug!(%run, "AG-UI stream ended early (reader gone or slow)");
            },
            () = caller.revoked() => {
                tracing::info!(%run, namespace = caller.ns.as_str(), "AG-UI stream closed: its token was revoked by a reload");
            }
        }
    });
    let body = futures_util::stream::poll_fn(move |cx| {
        rx.poll_recv(cx).map(|b| b.map(Ok::<_, Infallible>))
    });
    super::super::stream::sse_response(Body::from_stream(body))
}

async fn run_one(state: &ApiState, plan: Plan, out: &Out) -> Result<(), Stop> {
    let Plan {
        ns,
        caller: _,
        run_doc,
        after,
        mut mapper,
        permit: _permit,
    } = plan;
    let run_id = mapper.cursor_run.clone();
    out.send(&[AgUiEvent::RunStarted {
        thread_id: mapper.thread_id.clone(),
        run_id: mapper.run_id.clone(),
        protocol_version: PROTOCOL_VERSION,
    }])
    .await?;
    let reader = state.reader(&ns);
    // Wake-ups first, then the first read: an append between the two is not missed.
    let mut follow = state.hub().follow(&ns, &run_id);
    let mut approvals = state.approvals().subscribe();
    let mut frontend = state.tools().frontend().subscribe();
    let agent = run_doc
        .get("agentId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let ctx = RunCtx {
        state,
        ns: &ns,
        run_id: &run_id,
        run_doc: &run_doc,
    };
    let gap = |mapper: &AgUiMapper, reason: String| {
        mapper.error(
            format!("the run's events cannot be read: {reason}"),
            "stream_gap".into(),
        )
    };
    let mut own = match ctx.mapper_at(after).await {
        Ok(own) => own,
        Err(FeedError::Gap { reason, .. }) => return out.send(&[gap(&mapper, reason)]).await,
    };
    let mut pos = own.at;
    let keepalive = state.config().keepalive();
    let shutdown = state.shutdown_token();
    loop {
        // 1. Everything stored after the position.
        loop {
            let events = match ctx.page(pos).await {
                Ok(events) => events,
                Err(FeedError::Gap { reason, .. }) => {
                    return out.send(&[gap(&mapper, reason)]).await
                }
            };
            if events.is_empty() {
                break;
            }
            for ev in &events {
                let durable = ctx.durable(&mut own.mapper, ev).await;
                pos = ev.seq;
                match mapper.map(durable, ev.seq) {
                    Mapped::Go(events) => out.send(&events).await?,
                    Mapped::End(events) => return out.send(&events).await,
                }
            }
        }
        // 2. A held call: the AG-UI run ends with its interrupts; the Cursor run waits.
        let pending = state.approvals().pending_of_run(&ns, &run_id).await;
        let mut held = None;
        if !pending.is_empty() {
            let mut events = Vec::new();
            for a in &pending {
                if let Some(call) = &a.tool_call_id {
                    events.extend(mapper.open(call, &a.tool, &a.args));
                }
            }
            let interrupts: Vec<Value> = pending
                .iter()
                .map(|a| super::interrupts::interrupt(state, a))
                .collect();
            events.push(
                mapper.finished(json!({"type": "interrupt", "interrupts": interrupts}), None),
            );
            held = Some(events);
        }
        // 2b. A frontend tool call waits for the app: the AG-UI run ends successfully,
        // naming the calls the app owes a result; the Cursor run keeps them held.
        let owed: Vec<_> = match held {
            Some(_) => Vec::new(),
            None => state.tools().frontend().pending_of(&ns, &agent),
        };
        let owed: Vec<_> = owed
            .into_iter()
            .filter(|c| c.run_id.as_deref().is_none_or(|r| r == run_id))
            .collect();
        if !owed.is_empty() {
            let mut events = Vec::new();
            for c in &owed {
                events.extend(mapper.open(&c.tool_call_id, &c.tool, &c.args));
            }
            let ids: Vec<&str> = owed.iter().map(|c| c.tool_call_id.as_str()).collect();
            events
                .push(mapper.finished(json!({"type": "success", "pendingToolCallIds": ids}), None));
            held = Some(events);
        }
        if let Some(events) = held {
            state.ag_ui_held().stop(
                &ns,
                &run_id,
                Stopped {
                    pos,
                    opened: mapper.opened.clone(),
                },
            );
            return out.send(&events).await;
        }
        // 3. Ended without a terminal event (cancelled while queued, ...).
        if let Some(doc) = reader.run(&run_id).await.ok().flatten() {
            if is_terminal(&doc) {
                let stored = reader
                    .events_after(&run_id, pos, 1)
                    .await
                    .unwrap_or_default();
                if stored.is_empty() {
                    let last = match RunStatus::of_doc(&doc) {
                        Some(RunStatus::Finished) => {
                            mapper.finished(json!({"type": "success"}), None)
                        }
                        Some(RunStatus::Cancelled) => {
                            mapper.finished(json!({"type": "cancelled"}), None)
                        }
                        status => {
                            let status = status.map_or("", RunStatus::as_str);
                            mapper.error(format!("the run ended {status}"), status.into())
                        }
                    };
                    return out.send(&[last]).await;
                }
                continue;
            }
        }
        // 4. Wait for an append, an approval of this run, or a timer.
        let keepalive_at = Instant::now() + keepalive;
        let fallback_at = Instant::now() + FALLBACK_READ;
        loop {
            tokio::select! {
                changed = follow.rx.changed() => {
                    if changed.is_err() {
                        tokio::time::sleep(FALLBACK_READ).await;
                    }
                    break;
                }
                changed = frontend.changed() => {
                    if changed.is_err() {
                        tokio::time::sleep(FALLBACK_READ).await;
                    }
                    break;
                }
                event = approvals.recv() => match event {
                    Ok(event) if event.is_for(&ns, &run_id) => break,
                    Ok(_) => {}
                    Err(_) => break,
                },
                () = tokio::time::sleep_until(keepalive_at.min(fallback_at)) => {
                    if Instant::now() >= keepalive_at {
                        out.raw(": keepalive\n\n".into()).await?;
                    }
                    break;
                }
                () = shutdown.cancelled() => {
                    // The Cursor run goes on; the AG-UI run cannot say how it ends.
                    return out.send(&[mapper.error(
                        "callbackd is shutting down: the run goes on; its session has the rest".into(),
                        "unavailable".into(),
                    )]).await;
                }
            }
        }
    }
}
