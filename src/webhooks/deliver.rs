//! The delivery worker: claims due rows of the outbox, posts each signed to its endpoint,
//! and settles it (delivered, retried on the endpoint's schedule, or given up).
//!
//! Each attempt is a task of its own, bounded by [`IN_FLIGHT`]: a receiver that answers
//! slowly or never holds its own attempt until the endpoint's timeout, never the run, the
//! store or the other deliveries. A claim lasts the longest timeout and a margin: a daemon
//! that dies mid-attempt leaves its rows to be claimed again once it runs out (at least
//! once, with the same `webhook-id`).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Semaphore;

use super::{sign, Endpoint, Inner, Outcome};
use crate::clock::now_ms;
use crate::store::outbox::{Claim, Delivery, Settle};

/// Attempts running at once, at most.
const IN_FLIGHT: usize = 32;

/// How often the outbox is read when nothing woke the worker: the fallback for rows written
/// by another daemon or whose retry is due.
const POLL: Duration = Duration::from_millis(500);

/// How often settled deliveries past the retention are removed.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Bytes of a receiver's answer read at most (only its status matters; the start of the
/// body is kept as the error of a failed attempt).
const MAX_ANSWER_BYTES: usize = 64 << 10;

/// Runs until the daemon stops.
pub async fn run(inner: Arc<Inner>) {
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    let longest = inner
        .endpoints
        .iter()
        .map(|e| e.config.timeout_ms)
        .max()
        .unwrap_or(10_000);
    let lease = longest as i64 + 30_000;
    let urls: Vec<String> = inner
        .endpoints
        .iter()
        .map(|e| e.config.url.clone())
        .collect();
    let mut pruned_at: Option<tokio::time::Instant> = None;
    loop {
        if let Some(age) = inner.retention {
            if pruned_at.is_none_or(|t| t.elapsed() >= PRUNE_EVERY) {
                pruned_at = Some(tokio::time::Instant::now());
                let before = now_ms() - age.as_millis() as i64;
                match inner.records.prune_deliveries(before).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(
                        deliveries = n,
                        "retention removed settled webhook deliveries"
                    ),
                    Err(e) => tracing::warn!(error = %e, "webhooks: cannot prune the outbox"),
                }
            }
        }
        let free = slots.available_permits();
        if free > 0 {
            let now = now_ms();
            let claim = Claim {
                owner: inner.owner.clone(),
                now_ms: now,
                until_ms: now + lease,
                urls: urls.clone(),
                limit: free as i64,
            };
            match inner.records.claim_deliveries(claim).await {
                Ok(due) => {
                    for d in due {
                        let Ok(permit) = slots.clone().acquire_owned().await else {
                            return;
                        };
                        let inner = inner.clone();
                        tokio::spawn(async move {
                            attempt(&inner, d).await;
                            drop(permit);
                        });
                    }
                }
                Err(e) => tracing::warn!(error = %e, "webhooks: cannot read the outbox"),
            }
            if let Ok(n) = inner.records.pending_deliveries().await {
                inner.metrics.webhooks_pending(n);
            }
        }
        tokio::select! {
            _ = inner.wake.notified() => {
                // Woken by a write still committing: give it a moment.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}

/// One attempt of `d`, settled.
async fn attempt(inner: &Inner, d: Delivery) {
    let Some(endpoint) = inner.endpoints.iter().find(|e| e.config.url == d.entry.url) else {
        return;
    };
    let result = post(endpoint, &d).await;
    let now = now_ms();
    let done = d.attempts + 1;
    let schedule = &endpoint.config.retry_backoff_ms;
    let (state, next_at, outcome) = match &result {
        Ok(status) if (200..300).contains(status) => ("delivered", now, Outcome::Delivered),
        _ => match schedule.get(done as usize - 1) {
            Some(delay) => ("pending", now + *delay as i64, Outcome::Retry),
            None => ("failed", now, Outcome::Failed),
        },
    };
    let (status, error) = match result {
        Ok(status) if (200..300).contains(&status) => (Some(status), None),
        Ok(status) => (
            Some(status),
            Some(format!("the receiver answered {status}")),
        ),
        Err(e) => (None, Some(e)),
    };
    match &error {
        None => tracing::info!(
            id = %d.entry.id, r#type = %d.entry.kind, url = %d.entry.url, attempt = done,
            "webhook delivered"
        ),
        Some(e) => tracing::warn!(
            id = %d.entry.id, r#type = %d.entry.kind, url = %d.entry.url, attempt = done,
            error = %e, state, "webhook attempt failed"
        ),
    }
    let settle = Settle {
        id: d.entry.id.clone(),
        url: d.entry.url.clone(),
        owner: inner.owner.clone(),
        state,
        next_at_ms: next_at,
        status: status.map(i64::from),
        error,
        at_ms: now,
    };
    match inner.records.settle_delivery(settle).await {
        Ok(true) => inner.count(outcome),
        Ok(false) => {
            tracing::warn!(id = %d.entry.id, "webhooks: the claim ran out during the attempt")
        }
        Err(e) => {
            tracing::warn!(id = %d.entry.id, error = %e, "webhooks: cannot settle a delivery")
        }
    }
}

/// Posts `d` signed, within the endpoint's timeout: the answer's status, or why there was
/// none. A redirect is an answer like any other (3xx: not delivered, never followed).
async fn post(endpoint: &Endpoint, d: &Delivery) -> Result<u16, String> {
    let timestamp = now_ms() / 1000;
    let body = Bytes::from(d.entry.body.clone());
    let request = http::Request::post(d.entry.url.as_str())
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::USER_AGENT, "callbackd-webhooks")
        .header("webhook-id", d.entry.id.as_str())
        .header("webhook-timestamp", timestamp.to_string())
        .header(
            "webhook-signature",
            sign::signature(&endpoint.key, &d.entry.id, timestamp, &body),
        )
        .body(body)
        .map_err(|e| format!("cannot build the request: {e}"))?;
    let timeout = Duration::from_millis(endpoint.config.timeout_ms);
    match tokio::time::timeout(timeout, crate::outbound::send(request, MAX_ANSWER_BYTES)).await {
        Err(_) => Err(format!(
            "no answer within the {} ms timeout",
            endpoint.config.timeout_ms
        )),
        Ok(Err(e)) => Err(why(&*e)),
        Ok(Ok(answer)) => Ok(answer.status().as_u16()),
    }
}

/// An error and its causes on one line, each said once (hyper's errors nest the reason).
fn why(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out = format!("{out}: {text}");
        }
        cause = c.source();
    }
    out
}
