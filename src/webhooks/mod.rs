//! Webhooks (issue 40, docs/webhooks.md): signed `POST`s that tell people an approval or a
//! question waits for them, how it was decided, and that a run ended.
//!
//! At least once, from a durable outbox: the store records a delivery per event and
//! endpoint in the same transaction as what caused it ([`compose`], set on the store as its
//! outbox's composer), and [`deliver`]'s worker claims, posts and settles them, so a crash,
//! a stop or a restart loses none, and of several daemons on one PostgreSQL store only one
//! posts each. Every attempt of an event carries the same `webhook-id` and a fresh
//! `webhook-timestamp` and `webhook-signature` ([`sign`], Standard Webhooks).
//!
//! Files, one concept each: [`compose`] (what an event says), [`sign`] (the signature),
//! [`deliver`] (the worker).

mod compose;
mod deliver;
mod sign;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use crate::config::WebhookConfig;
use crate::metrics::Metrics;
use crate::store::outbox::{Composer, Happening, OutboxEntry, OutboxRecords};
use crate::store::Store;

/// One `[[webhooks]]` entry, ready to sign with.
#[derive(Debug)]
pub struct Endpoint {
    config: WebhookConfig,
    /// The secret's bytes (after `whsec_`).
    key: Vec<u8>,
    /// The console's address for links (`console_url`, or the daemon's own).
    console: Option<String>,
}

/// The daemon's webhooks: set on the store as its outbox's composer, and the worker that
/// delivers what it records.
#[derive(Clone)]
pub struct Webhooks {
    inner: Arc<Inner>,
}

struct Inner {
    endpoints: Arc<[Endpoint]>,
    records: Arc<dyn OutboxRecords>,
    /// This daemon's name on the rows it claims.
    owner: String,
    /// Rung by the composer when a write records deliveries.
    wake: Arc<Notify>,
    /// `[retention] events_max_age`: settled deliveries older than it are removed.
    retention: Option<Duration>,
    metrics: Metrics,
}

/// How an attempt ended, counted in `callbackd_webhook_deliveries_total{outcome}`.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    Delivered,
    Retry,
    Failed,
}

impl Inner {
    fn count(&self, outcome: Outcome) {
        self.metrics.webhook_attempt(match outcome {
            Outcome::Delivered => "delivered",
            Outcome::Retry => "retry",
            Outcome::Failed => "failed",
        });
    }
}

/// The composer the store calls inside its writes: only the endpoints and a bell, never the
/// store itself (which holds it).
struct Compose {
    endpoints: Arc<[Endpoint]>,
    wake: Arc<Notify>,
}

impl Composer for Compose {
    fn compose(&self, happening: &Happening<'_>) -> Vec<OutboxEntry> {
        let entries = compose::entries(&self.endpoints, happening);
        if !entries.is_empty() {
            self.wake.notify_one();
        }
        entries
    }
}

impl Webhooks {
    /// The webhooks of `configs` (with their signing keys, in the same order), recorded in
    /// `store`'s outbox from now on; `None` without any. `listen` is the daemon's own
    /// address, the console's in links when an entry sets no `console_url`.
    pub fn attach(
        configs: &[WebhookConfig],
        keys: Vec<Vec<u8>>,
        listen: Option<&str>,
        store: &Arc<dyn Store>,
        retention: Option<Duration>,
        metrics: Metrics,
    ) -> Option<Webhooks> {
        if configs.is_empty() {
            return None;
        }
        let endpoints: Arc<[Endpoint]> = configs
            .iter()
            .zip(keys)
            .map(|(config, key)| Endpoint {
                console: config
                    .console_url
                    .clone()
                    .or_else(|| listen.map(str::to_string)),
                config: config.clone(),
                key,
            })
            .collect();
        let wake = Arc::new(Notify::new());
        store.set_outbox(Arc::new(Compose {
            endpoints: endpoints.clone(),
            wake: wake.clone(),
        }));
        let mut owner = [0u8; 8];
        let _ = getrandom::fill(&mut owner);
        Some(Webhooks {
            inner: Arc::new(Inner {
                endpoints,
                records: store.clone().outbox_records(),
                owner: format!(
                    "wh_{}",
                    owner.iter().map(|b| format!("{b:02x}")).collect::<String>()
                ),
                wake,
                retention,
                metrics,
            }),
        })
    }

    /// Starts the delivery worker on the current runtime; it runs until aborted.
    pub fn start(&self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(deliver::run(self.inner.clone()))
    }
}
