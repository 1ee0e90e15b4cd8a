//! [`Feed`]: the frames of one followed run, built once and shared by all its streams.
//!
//! Durable frames are a pure function of the run's stored events (and callbackd's records
//! beside them), so one stream's frame for seq N is every stream's. The feed keeps the last
//! [`WINDOW`] frames and the mapper state after them; a stream at or inside the window takes
//! its frames from there, and the first one past the window's end reads the next page from
//! the store for everybody. With N followers of a live run, an append costs one store read
//! and one mapping instead of N of each. A stream behind the window (a replay from far back)
//! reads and maps on its own ([`Private`]) until it reaches the window.

use std::collections::VecDeque;

use bytes::Bytes;
use serde_json::Value;

use super::reader::Reader;
use super::ApiState;
use crate::account::{event_json, Beside, Durable, RunMapper, RunSources, StoredEvent};
use crate::store::Namespace;

/// Frames kept per followed run.
pub const WINDOW: usize = 1024;
/// Events read per store call.
pub const PAGE: usize = 256;

/// One durable event's SSE frame.
#[derive(Clone)]
pub struct Frame {
    pub seq: u64,
    pub bytes: Bytes,
    /// `completed` or `error`: the run's stream ends after it.
    pub terminal: bool,
}

/// Why frames could not be made.
pub enum FeedError {
    /// A stored event is missing or unreadable: the stream sends `stream_gap`.
    Gap { after_seq: u64, reason: String },
}

#[derive(Default)]
struct FeedState {
    /// The mapper after `next`; `None` until a stream hands one over.
    mapper: Option<RunMapper>,
    /// The last seq mapped.
    next: u64,
    recent: VecDeque<Frame>,
}

/// The shared frames of one run (in the follow hub's entry for it).
#[derive(Default)]
pub struct Feed {
    state: tokio::sync::Mutex<FeedState>,
}

/// What a run's stream needs to make frames itself.
pub struct Private {
    pub mapper: RunMapper,
    /// The seq `mapper` has mapped up to.
    pub at: u64,
}

/// The context every frame of a run is made in.
pub struct RunCtx<'a> {
    pub state: &'a ApiState,
    pub ns: &'a Namespace,
    pub run_id: &'a str,
    pub run_doc: &'a Value,
}

impl RunCtx<'_> {
    fn reader(&self) -> Reader<'_> {
        self.state.reader(self.ns)
    }

    /// Where the run's account reads callbackd's records.
    fn sources(&self) -> RunSources<'_> {
        RunSources {
            records: self.state.records().as_ref(),
            approvals: self.state.approvals().records().as_ref(),
            ns: self.ns,
            run_id: self.run_id,
        }
    }

    /// callbackd's records of the run: its tool calls and approvals.
    pub async fn beside(&self) -> Result<Beside, crate::store::StoreError> {
        self.sources().beside().await
    }

    /// The frame of stored event `ev`, mapped by `mapper` (which must be at `ev.seq - 1`).
    /// The `tool_completed` of calls its run's end closed go before it, without an `id:`
    /// line: a reader resuming after this seq has seen them.
    pub async fn frame(&self, mapper: &mut RunMapper, ev: &StoredEvent) -> Frame {
        let (data, terminal) = self.event(mapper, ev).await;
        let mut text = String::new();
        let (last, closed) = data.split_last().expect("one event at least");
        for d in closed {
            text.push_str(&format!("data: {d}\n\n"));
        }
        text.push_str(&format!("id: {}\ndata: {last}\n\n", ev.seq));
        Frame {
            seq: ev.seq,
            bytes: Bytes::from(text),
            terminal,
        }
    }

    /// The `data:` JSON of stored event `ev` (what a frame and an events page carry): the
    /// `tool_completed` of the calls a run's end closed, then its own; and whether it ends
    /// the run's stream.
    pub async fn event(&self, mapper: &mut RunMapper, ev: &StoredEvent) -> (Vec<String>, bool) {
        let mut event = self.durable(mapper, ev).await;
        if let Durable::RunStarted { input, .. } = &mut event {
            *input = self.input(ev).await;
        }
        if let Durable::MessageSnapshot { delta, .. } = &mut event {
            let sealed = self.state.live_tokens().seal(self.ns, self.run_id, ev.seq);
            *delta = self
                .state
                .records()
                .snapshot_delta(self.ns, self.run_id, ev.seq, sealed)
                .await
                .unwrap_or(sealed.unwrap_or(0));
        }
        let mut data: Vec<String> = mapper
            .take_closed()
            .iter()
            .map(|c| event_json(c, ev.seq, self.run_id, ev.created_at_ms))
            .collect();
        data.push(event_json(&event, ev.seq, self.run_id, ev.created_at_ms));
        (data, event.is_terminal())
    }

    /// The typed stream event of stored event `ev`, mapped by `mapper` (at `ev.seq - 1`)
    /// with callbackd's records of how the run's tool calls ended: what a frame is made of,
    /// and what `POST /v1/ag-ui` maps to AG-UI. The calls a run's end closes wait in the
    /// mapper (`take_closed`).
    pub async fn durable(&self, mapper: &mut RunMapper, ev: &StoredEvent) -> Durable {
        self.sources().map(mapper, ev).await
    }

    /// The user message of the run, for its `run_started` (`ev`, its stored `request`):
    /// settled once for every reader and replay ([`super::prompt`]).
    async fn input(&self, ev: &StoredEvent) -> Option<crate::account::RunInput> {
        let session = self
            .run_doc
            .get("agentId")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let prompt = super::prompt::Prompt {
            state: self.state,
            ns: self.ns,
            run_id: self.run_id,
        };
        prompt
            .settled(ev, session)
            .await
            .map(crate::account::RunInput::whole)
    }

    /// The next page of stored events after `pos`, checked for holes.
    pub async fn page(&self, pos: u64) -> Result<Vec<StoredEvent>, FeedError> {
        let events = self
            .reader()
            .events_after(self.run_id, pos, PAGE)
            .await
            .map_err(|e| FeedError::Gap {
                after_seq: pos,
                reason: e.detail,
            })?;
        // Up to the first hole; the hole itself only once nothing before it is left.
        let mut events = events;
        // Counted as distances from `pos`: `?after=` may be as large as u64::MAX.
        let good = (1u64..)
            .zip(events.iter())
            .take_while(|(n, ev)| ev.seq.checked_sub(pos) == Some(*n))
            .count();
        if good == 0 {
            if let Some(ev) = events.first() {
                return Err(FeedError::Gap {
                    after_seq: pos,
                    reason: format!(
                        "event {} of run {} is missing from the store (the next stored one is {})",
                        pos.saturating_add(1),
                        self.run_id,
                        ev.seq
                    ),
                });
            }
        }
        events.truncate(good);
        Ok(events)
    }

    /// A fresh mapper at `pos`: the run's events up to it, mapped and not sent. Its `at`
    /// says how far it truly got: short of `pos` when the run has fewer events stored.
    pub async fn mapper_at(&self, pos: u64) -> Result<Private, FeedError> {
        let beside = self.beside().await.unwrap_or_default();
        let mut private = Private {
            mapper: RunMapper::new(self.run_doc, beside),
            at: 0,
        };
        self.catch_up(&mut private, pos).await?;
        Ok(private)
    }

    /// Maps (without sending) the stored events after `private.at` up to `pos`, as far as
    /// they are stored; whether it got to `pos`.
    pub async fn catch_up(&self, private: &mut Private, pos: u64) -> Result<bool, FeedError> {
        while private.at < pos {
            let events = self.page(private.at).await?;
            if events.is_empty() {
                return Ok(false);
            }
            for ev in events.iter().take_while(|ev| ev.seq <= pos) {
                private.mapper.map(ev);
                private.at = ev.seq;
            }
        }
        Ok(true)
    }

    /// The stream's own mapper at `pos` (as far as the store has events): the one it has,
    /// caught up, or a fresh one.
    async fn own_at(&self, private: &mut Option<Private>, pos: u64) -> Result<Private, FeedError> {
        let mut own = match private.take() {
            Some(p) if p.at <= pos => p,
            _ => return self.mapper_at(pos).await,
        };
        self.catch_up(&mut own, pos).await?;
        Ok(own)
    }
}

impl Feed {
    /// The frames after `pos` (at most a page more than the window holds); empty when there
    /// is nothing new. `private` is the stream's own mapper, used (and kept at `pos`) when
    /// the window does not cover `pos`. `known`: the last seq an append notification named;
    /// when the feed has mapped that far, the store is not asked again (`None`: ask).
    pub async fn after(
        &self,
        ctx: &RunCtx<'_>,
        pos: u64,
        private: &mut Option<Private>,
        known: Option<u64>,
    ) -> Result<Vec<Frame>, FeedError> {
        let mut st = self.state.lock().await;
        let covered = st.mapper.is_some()
            && st.next >= pos
            && st
                .recent
                .front()
                .map_or(st.next == pos, |f| f.seq <= pos.saturating_add(1));
        if !covered {
            if st.mapper.is_some() && st.next > pos {
                // The feed is ahead, past its window: replay on our own.
                drop(st);
                return Self::private_page(ctx, pos, private).await;
            }
            // The feed is behind us or new: it continues from our position and context, but
            // only from a position the store has reached. A stream asked to start past the
            // last stored event (`?after=` beyond the end) keeps its own mapper, short of its
            // position, until the events up to it are stored: the feed must never believe it
            // mapped events it did not read (every stream past that point would get frames
            // made from the wrong state).
            let own = ctx.own_at(private, pos).await?;
            if own.at < pos {
                *private = Some(own);
                return Ok(Vec::new());
            }
            st.mapper = Some(own.mapper);
            st.next = pos;
            st.recent.clear();
        }
        let caught_up = known.is_some_and(|k| st.next >= k);
        if st.next == pos && !caught_up {
            let events = ctx.page(st.next).await?;
            let FeedState {
                mapper,
                next,
                recent,
            } = &mut *st;
            let mapper = mapper.as_mut().expect("set above");
            for ev in &events {
                let frame = ctx.frame(mapper, ev).await;
                *next = ev.seq;
                recent.push_back(frame);
                if recent.len() > WINDOW {
                    recent.pop_front();
                }
            }
        }
        // The window holds consecutive seqs: the frames after `pos` are its tail.
        let first = st.recent.front().map_or(pos.saturating_add(1), |f| f.seq);
        let skip = pos.saturating_add(1).saturating_sub(first) as usize;
        Ok(st.recent.iter().skip(skip).cloned().collect())
    }

    /// One page after `pos` made with the stream's own mapper.
    async fn private_page(
        ctx: &RunCtx<'_>,
        pos: u64,
        private: &mut Option<Private>,
    ) -> Result<Vec<Frame>, FeedError> {
        let mut own = ctx.own_at(private, pos).await?;
        if own.at < pos {
            *private = Some(own);
            return Ok(Vec::new());
        }
        let events = ctx.page(pos).await?;
        let mut frames = Vec::with_capacity(events.len());
        for ev in &events {
            frames.push(ctx.frame(&mut own.mapper, ev).await);
            own.at = ev.seq;
        }
        *private = Some(own);
        Ok(frames)
    }
}
