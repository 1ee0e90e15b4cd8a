//! `stream` (issue 9): followers of the run API's SSE stream on live runs that are being
//! appended at full speed. Reports the append→delivery latency (p50/p99), events delivered
//! per second, the daemon's RSS per idle open stream, and the append rate with followers
//! attached against the same appends without any (the reference, measured in the same run).
//!
//! Each appended event carries its send time (`message.t`, ns since the bench started, in a
//! message type the stream passes through as `sdk_message`); a follower computes the latency
//! when the event arrives. Checks: every follower receives every seq of its run, in order,
//! exactly once, ending with the run's terminal event.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::client::Conn;
use crate::gen::status_append;
use crate::target::{rss_kib, Target};

/// What one phase of `stream` measured.
pub struct StreamFigures {
    pub followers: usize,
    pub runs: usize,
    pub events_per_run: usize,
    /// Appends per second with the followers attached, and without (same runs and sizes).
    pub append_rate: f64,
    pub append_rate_alone: f64,
    /// Append → delivery, sorted, ns.
    pub latencies: Vec<u64>,
    pub delivered: usize,
    pub wall: Duration,
    pub wrong: usize,
}

impl StreamFigures {
    pub fn quantile(&self, p: f64) -> Duration {
        quantile(&self.latencies, p)
    }
}

/// The `p` quantile of `sorted` latencies (ns); zero when there are none.
pub(crate) fn quantile(sorted: &[u64], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Duration::from_nanos(sorted[i - 1])
}

fn agent_doc(agent: &str) -> String {
    format!(
        r#"{{"substore":"agents","method":"create","input":{{"agent":{{"agentId":"{agent}","cwd":"/bench","status":"running","activeRunId":null,"name":"bench","createdAt":1,"updatedAt":1}}}}}}"#
    )
}

fn run_doc(agent: &str, run: &str) -> String {
    format!(
        r#"{{"substore":"runs","method":"create","input":{{"run":{{"runId":"{run}","requestId":null,"agentId":"{agent}","turnNumber":1,"status":"running","model":{{"id":"bench"}},"result":null,"error":null,"usageRef":null,"usage":null,"createdAt":1,"updatedAt":1,"startedAt":1,"endedAt":null,"startCheckpointRef":null,"latestCheckpointRef":null}}}}}}"#
    )
}

pub(crate) async fn call(conn: &mut Conn, body: String) -> anyhow::Result<()> {
    let (status, answer) = conn.call(Bytes::from(body)).await?;
    if status != 200 {
        bail!(
            "store call failed: {status} {}",
            String::from_utf8_lossy(&answer)
        );
    }
    Ok(())
}

/// Creates `runs` live runs of one agent.
pub(crate) async fn setup(
    target: &Target,
    tag: &str,
    runs: usize,
) -> anyhow::Result<(String, Vec<String>)> {
    let mut conn = Conn::connect(target.ep.clone()).await?;
    let agent = format!("agent-{tag}");
    let _ = conn.call(Bytes::from(agent_doc(&agent))).await?;
    let ids: Vec<String> = (0..runs).map(|r| format!("run-{tag}-{r}")).collect();
    for id in &ids {
        call(&mut conn, run_doc(&agent, id)).await?;
    }
    Ok((agent, ids))
}

/// An open SSE stream of one run.
pub(crate) struct Follower {
    body: hyper::body::Incoming,
    buf: Vec<u8>,
    _sender: hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
}

impl Follower {
    pub(crate) async fn open(target: &Target, token: &str, run: &str) -> anyhow::Result<Follower> {
        Follower::open_at(target.ep.addr, token, run).await
    }

    /// [`Follower::open`] by the daemon's address (from a task that does not hold the target).
    pub(crate) async fn open_at(
        addr: std::net::SocketAddr,
        token: &str,
        run: &str,
    ) -> anyhow::Result<Follower> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let req = http::Request::get(format!("/v1/runs/{run}/stream"))
            .header("host", addr.to_string())
            .header("authorization", format!("Bearer {token}"))
            .body(Empty::<Bytes>::new())?;
        let resp = sender.send_request(req).await?;
        if resp.status() != 200 {
            bail!("stream of {run}: HTTP {}", resp.status());
        }
        Ok(Follower {
            body: resp.into_body(),
            buf: Vec::new(),
            _sender: sender,
        })
    }

    /// The next `data:` JSON and its `id`, or `None` at the end.
    pub(crate) async fn next(
        &mut self,
    ) -> anyhow::Result<Option<(Option<u64>, serde_json::Value)>> {
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buf.drain(..end + 2).collect();
                let text = std::str::from_utf8(&block)?;
                let mut id = None;
                let mut data = None;
                for line in text.lines() {
                    if let Some(v) = line.strip_prefix("id: ") {
                        id = Some(v.parse()?);
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data = Some(serde_json::from_str(v)?);
                    }
                }
                match data {
                    Some(d) => return Ok(Some((id, d))),
                    None => continue, // a keepalive comment
                }
            }
            match self.body.frame().await {
                Some(Ok(f)) => {
                    if let Ok(d) = f.into_data() {
                        self.buf.extend_from_slice(&d);
                    }
                }
                Some(Err(e)) => return Err(e.into()),
                None => return Ok(None),
            }
        }
    }
}

/// Appends `events` events to each run (one client per run, as fast as answers come), then
/// the terminal status; returns appends per second.
async fn append_all(
    target: &Target,
    agent: &str,
    runs: &[String],
    events: usize,
    epoch: Instant,
) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for run in runs {
        let mut conn = Conn::connect(target.ep.clone()).await?;
        let (agent, run) = (agent.to_string(), run.clone());
        tasks.push(tokio::spawn(async move {
            call(
                &mut conn,
                status_append(&agent, &run, r#"{"type":"request"}"#),
            )
            .await?;
            for i in 0..events {
                let t = epoch.elapsed().as_nanos() as u64;
                let msg = format!(r#"{{"type":"bench","i":{i},"t":{t}}}"#);
                call(&mut conn, status_append(&agent, &run, &msg)).await?;
            }
            call(
                &mut conn,
                status_append(&agent, &run, r#"{"type":"status","status":"FINISHED"}"#),
            )
            .await?;
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let n = runs.len() * (events + 2);
    Ok(n as f64 / started.elapsed().as_secs_f64())
}

/// One phase: `followers` spread over `runs` live runs, each appended `events` times.
pub async fn run(
    target: &Target,
    token: &str,
    tag: &str,
    followers: usize,
    runs: usize,
    events: usize,
) -> anyhow::Result<StreamFigures> {
    let epoch = Instant::now();
    // The reference: the same appends with nobody following.
    let (agent, alone_runs) = setup(target, &format!("{tag}-alone"), runs).await?;
    let append_rate_alone = append_all(target, &agent, &alone_runs, events, epoch).await?;

    let (agent, run_ids) = setup(target, tag, runs).await?;
    let mut opened = Vec::with_capacity(followers);
    for f in 0..followers {
        let run = &run_ids[f % runs];
        opened.push((run.clone(), Follower::open(target, token, run).await?));
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (run, mut follower) in opened {
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(events);
            let mut last = 0u64;
            let mut wrong = 0usize;
            while let Some((id, data)) = follower.next().await? {
                let Some(id) = id else { continue };
                if id != last + 1 {
                    wrong += 1;
                }
                last = id;
                if let Some(t) = data
                    .pointer("/message/t")
                    .and_then(serde_json::Value::as_u64)
                {
                    let now = epoch.elapsed().as_nanos() as u64;
                    latencies.push(now.saturating_sub(t));
                }
                if data["type"] == "completed" {
                    break;
                }
            }
            if last != events as u64 + 2 {
                wrong += 1;
            }
            anyhow::Ok((run, latencies, wrong, last))
        }));
    }
    let append_rate = append_all(target, &agent, &run_ids, events, epoch).await?;
    let mut latencies = Vec::new();
    let mut wrong = 0;
    let mut delivered = 0;
    for t in tasks {
        let (_, l, w, last) = tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .context("a follower did not finish")???;
        delivered += last as usize;
        latencies.extend(l);
        wrong += w;
    }
    let wall = started.elapsed();
    latencies.sort_unstable();
    Ok(StreamFigures {
        followers,
        runs,
        events_per_run: events,
        append_rate,
        append_rate_alone,
        latencies,
        delivered,
        wall,
        wrong,
    })
}

/// The daemon's RSS per idle open stream: `n` streams of a run nobody appends to.
pub async fn idle_rss(target: &Target, token: &str, tag: &str, n: usize) -> anyhow::Result<f64> {
    let pid = target
        .pid
        .ok_or_else(|| anyhow!("idle RSS needs the daemon's pid"))?;
    let (_, runs) = setup(target, &format!("{tag}-idle"), 1).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = rss_kib(pid).map(|r| r.0).unwrap_or(0);
    let mut open = Vec::with_capacity(n);
    for _ in 0..n {
        let mut f = Follower::open(target, token, &runs[0]).await?;
        let _ = f.next().await?; // up_to_date: the stream is set up on the daemon
        open.push(f);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_kib(pid).map(|r| r.0).unwrap_or(0);
    drop(open);
    Ok(after.saturating_sub(before) as f64 / n as f64)
}
