//! [`StoredEvent`]: a run's stored event as the account reads it, and the store reads the
//! account is made of (a run's document, its events after a seq), through the [`Store`]
//! trait only, so they work on every backend.

use serde_json::Value;

use crate::store::{Namespace, Page, RunFilter, Store, StoreCall, StoreError};

/// One stored run event, as read from the store.
#[derive(Debug, Clone)]
pub struct StoredEvent {
    pub seq: u64,
    pub created_at_ms: i64,
    pub payload: Value,
}

/// Why a read of the store gave no account.
#[derive(Debug)]
pub enum ReadError {
    /// The store call failed.
    Store(StoreError),
    /// What the store holds is not what the account expects (not JSON, an event without a
    /// seq): the detail says what.
    Stored(String),
}

impl From<StoreError> for ReadError {
    fn from(e: StoreError) -> Self {
        ReadError::Store(e)
    }
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Store(e) => e.fmt(f),
            ReadError::Stored(m) => f.write_str(m),
        }
    }
}

/// A stored document's JSON.
pub fn parse(text: &str) -> Result<Value, ReadError> {
    serde_json::from_str(text).map_err(|e| ReadError::Stored(format!("stored JSON: {e}")))
}

/// A list page: the items and the store's cursor of the next page.
pub struct Listed {
    pub items: Vec<Value>,
    pub next_cursor: Option<String>,
}

/// The page of a list call's output.
pub fn listed(output: &Option<String>) -> Result<Listed, ReadError> {
    let mut v = parse(output.as_deref().unwrap_or("{}"))?;
    let items = match v.get_mut("items").map(Value::take) {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    };
    let next_cursor = v
        .get("nextCursor")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .map(str::to_string);
    Ok(Listed { items, next_cursor })
}

/// A run's document by its id alone (the API's paths do not name its agent).
pub async fn run_doc(
    store: &dyn Store,
    ns: &Namespace,
    run_id: &str,
) -> Result<Option<Value>, ReadError> {
    let filter = RunFilter {
        agent_ids: None,
        run_ids: Some(vec![run_id.into()]),
    };
    let page = Page {
        cursor: None,
        limit: 1,
    };
    let out = store.call(ns, StoreCall::RunsList(filter, page)).await?;
    Ok(listed(&out)?.items.into_iter().next())
}

/// Run `run_id`'s stored events with `seq > after`, at most `limit`, in seq order.
pub async fn events_after(
    store: &dyn Store,
    ns: &Namespace,
    run_id: &str,
    after: u64,
    limit: usize,
) -> Result<Vec<StoredEvent>, ReadError> {
    let call = StoreCall::EventsList {
        run_id: run_id.into(),
        after_seq: after,
        limit,
    };
    let out = store.call(ns, call).await?;
    listed(&out)?.items.into_iter().map(stored_event).collect()
}

/// A stored event of its event document's text.
pub fn stored_event_of(doc: &str) -> Result<StoredEvent, ReadError> {
    stored_event(parse(doc)?)
}

/// A stored event of its event document (an item of `runEvents.list`).
fn stored_event(mut item: Value) -> Result<StoredEvent, ReadError> {
    let seq = item.get("seq").and_then(Value::as_u64);
    let at = item.get("createdAt").and_then(Value::as_f64);
    match (seq, at) {
        (Some(seq), Some(at)) => Ok(StoredEvent {
            seq,
            created_at_ms: at as i64,
            payload: item
                .get_mut("payload")
                .map(Value::take)
                .unwrap_or(Value::Null),
        }),
        _ => Err(ReadError::Stored(
            "a stored event has no seq or createdAt".into(),
        )),
    }
}
