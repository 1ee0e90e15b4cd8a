//! Live followers across daemons: every appending transaction sends one `NOTIFY` on
//! [`CHANNEL`] carrying ids only (schema, namespace, run id, seq, and the sending daemon's
//! instance id, well under PostgreSQL's 8000-byte payload cap), and each daemon keeps one
//! connection of its own, outside the pool, that `LISTEN`s and turns other daemons'
//! notifications into [`StoreNotice::Remote`]. The daemon's own appends are announced
//! locally right after their commit and skipped here.
//!
//! A change of an approval sends one too (`{"i", "s", "ns", "a": approval id}`), heard as
//! [`StoreNotice::ApprovalChanged`]: how a decision made through one daemon wakes the call
//! another daemon holds (`approvals::wake`).
//!
//! A notification is delivered only to connections listening when it commits, so after the
//! listening connection is lost and re-established every follower gets a
//! [`StoreNotice::Resync`] and re-reads what it follows.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use serde::Deserialize;
use tokio_postgres::{AsyncMessage, NoTls};

use super::records::LISTENER_APP;
use crate::store::json::{json_str, push_int};
use crate::store::{EventAppended, Namespace, Notices, StoreNotice};

/// The notification channel (database-wide; the payload names the schema).
pub const CHANNEL: &str = "callbackd_events";

/// Payloads longer than this (a run id of kilobytes) announce "re-read everything".
const MAX_PAYLOAD: usize = 7900;

/// The payload of an append's notification.
pub fn payload(instance: &str, schema: &str, notice: &EventAppended) -> String {
    let mut p = payload_head(instance, schema, &notice.ns, &notice.run_id);
    let seq = i64::try_from(notice.seq).unwrap_or(i64::MAX);
    if p.len() + digits(seq) + 1 > MAX_PAYLOAD {
        return resync_payload(instance, schema);
    }
    push_int(&mut p, seq);
    p.push('}');
    p
}

/// What the one-statement append (`append.rs`) gives `pg_notify`: the payload without its
/// seq and closing brace (`{"i":…,"s":…,"ns":…,"r":…,"q":`), which the statement completes
/// with the seq it assigned; or, when even the longest seq would not fit, the whole
/// "re-read everything" payload (`false`: nothing to append).
pub fn payload_template(
    instance: &str,
    schema: &str,
    ns: &Namespace,
    run_id: &str,
) -> (String, bool) {
    let head = payload_head(instance, schema, ns, run_id);
    if head.len() + digits(i64::MAX) + 1 > MAX_PAYLOAD {
        return (resync_payload(instance, schema), false);
    }
    (head, true)
}

/// The opening every payload shares: the sending daemon and the schema (`{"i":…,"s":…`),
/// with room for `extra` more bytes.
fn payload_open(instance: &str, schema: &str, extra: usize) -> String {
    let mut p = String::with_capacity(48 + extra);
    p.push_str(r#"{"i":"#);
    p.push_str(&json_str(instance));
    p.push_str(r#","s":"#);
    p.push_str(&json_str(schema));
    p
}

fn payload_head(instance: &str, schema: &str, ns: &Namespace, run_id: &str) -> String {
    let mut p = payload_open(instance, schema, 48 + run_id.len());
    p.push_str(r#","ns":"#);
    p.push_str(&json_str(ns.as_str()));
    p.push_str(r#","r":"#);
    p.push_str(&json_str(run_id));
    p.push_str(r#","q":"#);
    p
}

/// The payload that tells every follower of the schema to re-read (a run id too long).
fn resync_payload(instance: &str, schema: &str) -> String {
    let mut p = payload_open(instance, schema, 12);
    p.push_str(r#","all":true}"#);
    p
}

fn digits(n: i64) -> usize {
    n.unsigned_abs()
        .checked_ilog10()
        .map_or(1, |d| d as usize + 1)
        + usize::from(n < 0)
}

/// The payload of an approval change's notification (ids are short: no cap needed beyond
/// the one the id's own length keeps).
pub fn approval_payload(instance: &str, schema: &str, ns: &Namespace, id: &str) -> String {
    let mut p = payload_open(instance, schema, 16 + id.len());
    p.push_str(r#","ns":"#);
    p.push_str(&json_str(ns.as_str()));
    p.push_str(r#","a":"#);
    p.push_str(&json_str(id));
    p.push('}');
    p
}

#[derive(Deserialize)]
struct Payload {
    i: String,
    s: String,
    #[serde(default)]
    ns: String,
    #[serde(default)]
    r: String,
    #[serde(default)]
    q: u64,
    #[serde(default)]
    all: bool,
    /// An approval's id: its record changed.
    #[serde(default)]
    a: Option<String>,
}

/// What a notification means to this daemon, if anything.
fn decode(raw: &str, instance: &str, schema: &str) -> Option<StoreNotice> {
    let p: Payload = serde_json::from_str(raw).ok()?;
    if p.i == instance || p.s != schema {
        return None;
    }
    Some(if let Some(id) = p.a {
        StoreNotice::ApprovalChanged {
            ns: Namespace::new(&p.ns),
            id,
        }
    } else if p.all {
        StoreNotice::Resync
    } else {
        StoreNotice::Remote(EventAppended {
            ns: Namespace::new(&p.ns),
            run_id: p.r,
            seq: p.q,
        })
    })
}

/// The listening side: connects, `LISTEN`s, forwards notices; on any failure reconnects
/// with backoff and sends [`StoreNotice::Resync`] once it listens again. `ready` is told
/// when the first `LISTEN` is in place (or why it failed).
pub async fn run(
    mut cfg: tokio_postgres::Config,
    instance: String,
    schema: String,
    events: Arc<Notices>,
    ready: tokio::sync::oneshot::Sender<Result<(), tokio_postgres::Error>>,
) {
    cfg.application_name(format!("{LISTENER_APP} {instance}"));
    cfg.keepalives_idle(Duration::from_secs(30));
    let mut ready = Some(ready);
    let mut backoff = Duration::from_millis(50);
    loop {
        match listen_once(&cfg, &instance, &schema, &events, &mut ready).await {
            Ok(()) => backoff = Duration::from_millis(50),
            Err(e) => {
                if let Some(ready) = ready.take() {
                    let _ = ready.send(Err(e));
                    return;
                }
                tracing::warn!(error = %e, "the PostgreSQL listener connection failed; reconnecting");
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// One listening connection, until it breaks. `Ok` after it had been listening.
async fn listen_once(
    cfg: &tokio_postgres::Config,
    instance: &str,
    schema: &str,
    events: &Notices,
    ready: &mut Option<tokio::sync::oneshot::Sender<Result<(), tokio_postgres::Error>>>,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = cfg.connect(NoTls).await?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    if tx.send(n.payload().to_string()).is_err() {
                        break;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "the PostgreSQL listener connection broke");
                    break;
                }
            }
        }
    });
    let listening = client.batch_execute(&format!("LISTEN {CHANNEL}")).await;
    if let Err(e) = listening {
        driver.abort();
        return Err(e);
    }
    match ready.take() {
        Some(ready) => {
            let _ = ready.send(Ok(()));
        }
        // Back after a loss: whatever was announced meanwhile was not heard.
        None => {
            tracing::info!("the PostgreSQL listener is back; followers re-read");
            events.send(StoreNotice::Resync);
        }
    }
    while let Some(raw) = rx.recv().await {
        if let Some(notice) = decode(&raw, instance, schema) {
            events.send(notice);
        }
    }
    drop(client);
    let _ = driver.await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_carry_ids_and_stay_under_the_cap() {
        let notice = EventAppended {
            ns: Namespace::default(),
            run_id: "run-\"1".into(),
            seq: 42,
        };
        let p = payload("me", "public", &notice);
        assert_eq!(decode(&p, "me", "public"), None, "own notices are skipped");
        assert_eq!(decode(&p, "other", "elsewhere"), None, "other schemas too");
        assert_eq!(
            decode(&p, "other", "public"),
            Some(StoreNotice::Remote(notice))
        );
        let long = EventAppended {
            ns: Namespace::default(),
            run_id: "r".repeat(10_000),
            seq: 1,
        };
        let p = payload("me", "public", &long);
        assert!(p.len() < 200, "{p}");
        assert_eq!(decode(&p, "other", "public"), Some(StoreNotice::Resync));
    }

    #[test]
    fn the_one_statement_appends_template_completes_to_the_same_payload() {
        let ns = Namespace::new("team-a");
        let notice = EventAppended {
            ns: ns.clone(),
            run_id: "run-\"1".into(),
            seq: 42,
        };
        let (head, with_seq) = payload_template("me", "public", &ns, &notice.run_id);
        assert!(with_seq);
        // What the statement does with it: `head || seq::text || '}'`.
        assert_eq!(format!("{head}42}}"), payload("me", "public", &notice));
        let (p, with_seq) = payload_template("me", "public", &ns, &"r".repeat(10_000));
        assert!(!with_seq, "nothing to complete: {p}");
        assert_eq!(decode(&p, "other", "public"), Some(StoreNotice::Resync));
    }

    #[test]
    fn an_approval_change_is_heard_by_other_daemons_of_the_schema() {
        let ns = Namespace::new("team-a");
        let p = approval_payload("me", "public", &ns, "appr_1");
        assert_eq!(decode(&p, "me", "public"), None, "own notices are skipped");
        assert_eq!(decode(&p, "other", "elsewhere"), None);
        assert_eq!(
            decode(&p, "other", "public"),
            Some(StoreNotice::ApprovalChanged {
                ns,
                id: "appr_1".into()
            })
        );
    }
}
