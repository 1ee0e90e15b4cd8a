//! A run's prompt: the user message that started it, as its `run_started.input` and its
//! state's `input` say, settled once so that every reader and every replay says the same.
//!
//! Two sources. A run started through the run API has its text recorded by
//! `POST .../messages` ([`super::messages`]), a moment after the bridge stores the run's
//! `request`. A run started by another client (the Python SDK, the bridge's own `Send`) has
//! a prompt only when the backend sent the bridge a `user_message_appended` update: the SDK
//! stores it as the run's `user` event, right after `request` and before the model's first
//! output. That stored event is also all the bridge's `GetRunConversation` knows of the
//! prompt (it folds the same stored events into turns, and answers only once the run has
//! ended), so it is read here, from the store, with no bridge needed.
//!
//! Settling: the recorded text wins; else the text of a `user` event stored before the
//! run's first output. When neither can be known yet (a fresh run, or a message still being
//! sent), the first reader waits up to [`INPUT_WAIT`]. Whatever it decides is recorded,
//! the absence of a prompt too (an empty text, which no run API message can be and which
//! [`run_inputs`](crate::store::records::RunRecords::run_inputs) leaves out): the first
//! decision recorded stays, so a text that arrives later is never told to a replay when an
//! earlier reader was told `null`.

use std::time::Duration;

use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use super::ApiState;
use crate::account::StoredEvent;
use crate::store::{Namespace, StoreNotice};

/// How long the `run_started` of a run just started waits for its prompt.
const INPUT_WAIT: Duration = Duration::from_secs(2);
/// While it waits, how often the run API's record is looked at without an append.
const RECHECK: Duration = Duration::from_millis(20);
/// A `request` stored less than this long ago (ms) is a run just started.
const FRESH_MS: i64 = 10_000;
/// The run's first events, where its `user` event is looked for.
const FIRST: usize = 32;
/// The record of a run settled without a prompt.
const NONE: &str = "";

/// What a run's first stored events say of its prompt.
#[derive(Debug, PartialEq)]
enum Found {
    /// Its `user` event's text.
    Text(String),
    /// The model's first output, or the run's end, came with no `user` event before it.
    Without,
    /// Nothing decisive is stored yet.
    NotYet,
}

/// The prompt in a run's first events (in seq order, from its `request`).
fn found(events: &[StoredEvent]) -> Found {
    for ev in events {
        let Some(message) = ev
            .payload
            .get("message")
            .filter(|_| ev.payload.get("type").and_then(Value::as_str) == Some("sdk_message"))
        else {
            continue;
        };
        match message.get("type").and_then(Value::as_str) {
            Some("user") => {
                let text = user_text(message);
                return if text.is_empty() {
                    Found::Without
                } else {
                    Found::Text(text)
                };
            }
            Some("assistant" | "thinking" | "tool_call" | "task") => return Found::Without,
            Some("status")
                if message
                    .get("status")
                    .and_then(Value::as_str)
                    .and_then(crate::run::RunStatus::parse_event)
                    .is_some_and(crate::run::RunStatus::is_terminal) =>
            {
                return Found::Without
            }
            _ => {}
        }
    }
    if events.len() >= FIRST {
        Found::Without
    } else {
        Found::NotYet
    }
}

/// The text of a stored `user` message: its text parts, joined (as the SDK joins them).
fn user_text(message: &Value) -> String {
    message
        .pointer("/message/content")
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default()
}

/// Where a run's prompt is read and recorded.
pub(super) struct Prompt<'a> {
    pub state: &'a ApiState,
    pub ns: &'a Namespace,
    pub run_id: &'a str,
}

impl Prompt<'_> {
    /// The record: `Some(Some(text))`, `Some(None)` for a run settled without a prompt,
    /// `None` when nothing is recorded (or the store could not say).
    async fn record_of(&self) -> Option<Option<String>> {
        let record = self
            .state
            .records()
            .run_input_record(self.ns, self.run_id)
            .await
            .ok()??;
        Some((record != NONE).then_some(record))
    }

    /// Records `text` (or [`NONE`]) unless something is recorded already, and answers
    /// what is: the first decision stays.
    async fn record(&self, text: &str) -> Option<String> {
        if let Err(e) = self
            .state
            .records()
            .set_run_input(self.ns, self.run_id, text)
            .await
        {
            tracing::warn!(run_id = self.run_id, error = %e, "could not record the run's prompt");
        }
        self.record_of()
            .await
            .unwrap_or_else(|| (text != NONE).then(|| text.to_string()))
    }

    async fn found(&self) -> Found {
        match self
            .state
            .reader(self.ns)
            .events_after(self.run_id, 0, FIRST)
            .await
        {
            Ok(events) => found(&events),
            Err(_) => Found::NotYet,
        }
    }

    /// The prompt as it is known now, without waiting (a run's state): the recorded text,
    /// else a stored `user` event's, which is then recorded. Only a found text is recorded
    /// here: a run not settled yet may still get one.
    pub async fn known(&self) -> Option<String> {
        if let Some(record) = self.record_of().await {
            return record;
        }
        match self.found().await {
            Found::Text(text) => self.record(&text).await,
            Found::Without | Found::NotYet => None,
        }
    }

    /// The prompt for a `run_started` (`request`, the run's stored `request` event;
    /// `session`, its session), settled and recorded, so that this reader gets the bytes
    /// every other reader and every replay gets. A fresh `request` whose prompt is not
    /// known yet (neither its `user` event nor the run API's record has come) is waited
    /// for, up to [`INPUT_WAIT`]; then, or at once for an older one, the run is settled
    /// without a prompt.
    pub async fn settled(&self, request: &StoredEvent, session: &str) -> Option<String> {
        let fresh = crate::clock::now_ms().saturating_sub(request.created_at_ms) < FRESH_MS;
        let deadline = tokio::time::Instant::now() + INPUT_WAIT;
        // Subscribed before the first look: the run's next append (its `user` event, or its
        // first output, which settles it without one) wakes the wait at once. Every follower
        // of the run waits for this `run_started`, so a fixed sleep here held a streaming
        // run's first frames back by up to its length (issue 39: the burst's p99).
        let mut notices = self.state.store().subscribe();
        loop {
            // Whether a message is being sent first, then the record: `POST .../messages`
            // records before it stops sending, so a send seen over has its record seen.
            let sending = self.state.sending().is_sending(self.ns, session);
            if let Some(record) = self.record_of().await {
                return record;
            }
            match self.found().await {
                Found::Text(text) => return self.record(&text).await,
                // A message being sent here is recorded a moment after the run is named:
                // its model may answer before that, so only the record settles it.
                Found::Without if !sending => return self.record(NONE).await,
                _ => {}
            }
            if !fresh || tokio::time::Instant::now() >= deadline {
                return self.record(NONE).await;
            }
            // The run API's record of a message being sent comes with no notice: looked at
            // again after a short while all the same.
            let _ = tokio::time::timeout(RECHECK, self.appended(&mut notices)).await;
        }
    }

    /// Returns at the next append of this run that the store announces, or when notices
    /// were missed; never once the store has closed its notices (the caller's timeout ends
    /// the wait then).
    async fn appended(&self, notices: &mut tokio::sync::broadcast::Receiver<StoreNotice>) {
        loop {
            match notices.recv().await {
                Ok(StoreNotice::Appended(n) | StoreNotice::Remote(n))
                    if n.run_id == self.run_id && n.ns == *self.ns =>
                {
                    return
                }
                Ok(StoreNotice::Resync) | Err(RecvError::Lagged(_)) => return,
                Ok(_) => {}
                Err(RecvError::Closed) => std::future::pending().await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(seq: u64, message: &Value) -> StoredEvent {
        StoredEvent {
            seq,
            created_at_ms: 0,
            payload: json!({"type": "sdk_message", "message": message}),
        }
    }

    fn user(text: &str) -> Value {
        json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": text}]}})
    }

    fn start() -> Vec<StoredEvent> {
        vec![
            ev(1, &json!({"type": "request"})),
            ev(2, &json!({"type": "status", "status": "RUNNING"})),
        ]
    }

    #[test]
    fn a_user_event_before_the_first_output_is_the_prompt() {
        let mut events = start();
        events.push(ev(3, &user("deploy 1.4.2")));
        events.push(ev(4, &json!({"type": "assistant"})));
        assert_eq!(found(&events), Found::Text("deploy 1.4.2".into()));
    }

    #[test]
    fn an_output_or_an_end_before_any_user_event_settles_without_a_prompt() {
        let mut events = start();
        events.push(ev(3, &json!({"type": "assistant"})));
        events.push(ev(4, &user("a later message is not the prompt")));
        assert_eq!(found(&events), Found::Without);
        let mut ended = start();
        ended.push(ev(3, &json!({"type": "status", "status": "ERROR"})));
        assert_eq!(found(&ended), Found::Without);
    }

    #[test]
    fn a_run_with_only_its_start_stored_is_not_settled_yet() {
        assert_eq!(found(&start()), Found::NotYet);
        assert_eq!(found(&[]), Found::NotYet);
    }

    #[test]
    fn an_empty_user_message_is_no_prompt() {
        let mut events = start();
        events.push(ev(3, &user("")));
        assert_eq!(found(&events), Found::Without);
    }
}
