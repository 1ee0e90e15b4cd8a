//! Following one run's stream to its end, through dropped connections and daemon restarts.
//!
//! The follower keeps one position: the seq of the last *durable* event (one with an `id:`
//! line) it handed on. Tokens and control events never move it. Each reconnect asks for
//! `after=<that seq>`, and a durable event at or below it is dropped, so every durable event
//! is handed on exactly once however the connection breaks.

use std::time::Duration;

use http_body_util::BodyExt;
use serde_json::Value;

use super::http::{ApiClient, ClientError, StreamAnswer};
use super::sse::{SseItem, SseParser};

/// What [`follow`] hands its events to.
pub trait Sink {
    /// A stream event; `durable` when it had an `id:` line.
    fn event(&mut self, event: &Value, durable: bool) -> std::io::Result<()>;
    /// Something about the connection (lost, resuming), for a human.
    fn note(&mut self, text: &str);
}

#[derive(Debug, Clone)]
pub struct FollowOptions {
    /// Start after this durable seq (0: from the run's first event).
    pub after: u64,
    /// No byte for this long (keepalives included) means the connection is dead.
    pub idle_timeout: Duration,
    /// The longest wait between reconnects.
    pub max_backoff: Duration,
    /// Give up after this long without reaching the daemon (`None`: never).
    pub give_up_after: Option<Duration>,
}

impl Default for FollowOptions {
    fn default() -> Self {
        FollowOptions {
            after: 0,
            // Three keepalive periods of the API's default 15 s, and a little.
            idle_timeout: Duration::from_secs(50),
            max_backoff: Duration::from_secs(5),
            give_up_after: None,
        }
    }
}

/// How a follow ended.
#[derive(Debug)]
pub enum Followed {
    /// The run's terminal event (`completed` or `error`).
    Terminal(Value),
    /// `204`: the run is terminal and there was nothing after our position (it ended before
    /// we asked, at a seq we had already seen, or we started after its last event).
    NothingMore,
    /// `410 replay_expired`: retention removed the events asked for.
    Expired(ClientError),
}

/// Why a follow stopped without its run ending.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error(transparent)]
    Api(#[from] ClientError),
    #[error("writing the output failed: {0}")]
    Output(#[from] std::io::Error),
    #[error("gave up after {waited:?} without reaching callbackd; last error: {last}")]
    GaveUp { waited: Duration, last: ClientError },
}

/// Follows `run_id` until its terminal event. Returns the position reached with the outcome.
pub async fn follow(
    client: &ApiClient,
    run_id: &str,
    opts: &FollowOptions,
    sink: &mut impl Sink,
) -> Result<(Followed, u64), FollowError> {
    let mut last = opts.after;
    let mut attempt: u32 = 0;
    let mut failing_since: Option<tokio::time::Instant> = None;
    let path_for = |after: u64| format!("/v1/runs/{}/stream?after={after}", encode(run_id));
    loop {
        let why = match client.stream(&path_for(last)).await {
            Ok(StreamAnswer::NothingMore) => return Ok((Followed::NothingMore, last)),
            Ok(StreamAnswer::Events(body)) => {
                failing_since = None;
                let before = last;
                match read(body, &mut last, opts, sink).await? {
                    Read::Terminal(ev) => return Ok((Followed::Terminal(ev), last)),
                    Read::Reconnect(ms) => {
                        attempt = 0;
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                        continue;
                    }
                    Read::Broken(why) => {
                        if last > before {
                            attempt = 0;
                        }
                        why
                    }
                }
            }
            Err(e) if e.status() == Some(410) => return Ok((Followed::Expired(e), last)),
            Err(e) if e.is_transient() => {
                let since = *failing_since.get_or_insert_with(tokio::time::Instant::now);
                if let Some(limit) = opts.give_up_after {
                    if since.elapsed() >= limit {
                        return Err(FollowError::GaveUp {
                            waited: since.elapsed(),
                            last: e,
                        });
                    }
                }
                e.to_string()
            }
            Err(e) => return Err(e.into()),
        };
        let wait = backoff(attempt, opts.max_backoff);
        attempt = attempt.saturating_add(1);
        sink.note(&format!(
            "{why}; reconnecting in {:.1} s, resuming after event #{last}",
            wait.as_secs_f64()
        ));
        tokio::time::sleep(wait).await;
    }
}

enum Read {
    Terminal(Value),
    /// The server's `reconnect`: come back after this many ms.
    Reconnect(u64),
    /// The stream broke or ended early: reconnect with backoff.
    Broken(String),
}

async fn read(
    mut body: hyper::body::Incoming,
    last: &mut u64,
    opts: &FollowOptions,
    sink: &mut impl Sink,
) -> Result<Read, FollowError> {
    let mut parser = SseParser::new();
    let mut reconnect = None;
    loop {
        let frame = match tokio::time::timeout(opts.idle_timeout, body.frame()).await {
            Err(_) => {
                return Ok(Read::Broken(format!(
                    "nothing received for {:?}",
                    opts.idle_timeout
                )))
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => return Ok(Read::Broken(format!("the stream broke: {e}"))),
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        for item in parser.push(&data) {
            let SseItem::Event {
                id, data, retry, ..
            } = item
            else {
                continue;
            };
            let Ok(ev) = serde_json::from_str::<Value>(&data) else {
                continue;
            };
            let durable = match id.as_deref().map(str::parse::<u64>) {
                Some(Ok(seq)) => {
                    if seq <= *last {
                        continue; // seen before this reconnect
                    }
                    *last = seq;
                    true
                }
                Some(Err(_)) => continue, // not an id of ours: ignore rather than guess
                None => false,
            };
            let ty = ev.get("type").and_then(Value::as_str).unwrap_or("");
            match ty {
                "reconnect" => {
                    reconnect = ev
                        .get("retry_ms")
                        .and_then(Value::as_u64)
                        .or(retry)
                        .or(Some(0));
                }
                "stream_gap" => {
                    sink.event(&ev, false)?;
                    let reason = ev.get("reason").and_then(Value::as_str).unwrap_or("gap");
                    return Ok(Read::Broken(format!(
                        "the server could not read the event after #{} ({reason})",
                        ev.get("after_seq").and_then(Value::as_u64).unwrap_or(*last)
                    )));
                }
                _ => {}
            }
            sink.event(&ev, durable)?;
            if durable && (ty == "completed" || ty == "error") {
                return Ok(Read::Terminal(ev));
            }
        }
    }
    Ok(match reconnect {
        Some(ms) => Read::Reconnect(ms),
        None => Read::Broken("the stream ended before the run did".into()),
    })
}

fn backoff(attempt: u32, max: Duration) -> Duration {
    let ms = 200u64.saturating_mul(1 << attempt.min(6));
    Duration::from_millis(ms).min(max)
}

/// Percent-encodes a path segment (ids are UUID-like, but a typo must not become a path).
pub fn encode(segment: &str) -> String {
    let mut out = String::new();
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_to_its_cap() {
        let max = Duration::from_secs(5);
        assert_eq!(backoff(0, max), Duration::from_millis(200));
        assert_eq!(backoff(3, max), Duration::from_millis(1600));
        assert_eq!(backoff(30, max), max);
    }

    #[test]
    fn path_segments_are_encoded() {
        assert_eq!(encode("run-1_a.b"), "run-1_a.b");
        assert_eq!(encode("../x y"), "..%2Fx%20y");
    }
}
