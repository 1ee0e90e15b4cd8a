//! `burst` (issue 39): 100 followers of one run while one writer appends 2,000 events of
//! 200–2,000 bytes back to back (the SDK's `thinking` messages), as a fast turn streams (a
//! long answer, a big tool result).
//! Reports the latency from each append's acknowledgement to its delivery to each follower
//! (p50/p99) and the daemon's RSS per open stream during the burst.
//!
//! RSS per stream: each round first runs the same burst on a fresh daemon with a baseline
//! number of followers (`--burst-baseline-followers`, 1 by default: the run's shared feed
//! exists once anybody follows, so it is in both); the daemon's RSS read halfway through
//! the burst (after half the appends were answered), with the followers minus with the
//! baseline, over the difference in followers, is what each further open stream holds while
//! the burst goes on (the store's growth, and with 1 the feed's, are in both and cancel).
//! The same difference is also read once the followers are open, before the first append:
//! what an open stream costs by itself, and so what the burst adds to it.
//!
//! Each round starts a fresh daemon of each binary given (`--bin`, and `--burst-old-bin`
//! for the one to compare with), alternating them, so both see the same machine load.
//! Checks: every follower receives every seq of the run exactly once, in order, ending with
//! the run's terminal event.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::namespaces::{self, Setup};
use super::stream::{call, setup, Follower};
use crate::client::Conn;
use crate::gen::{status_append, Rng};
use crate::target::{api_token, reset_peak, rss_kib};

/// What one round of one binary measured.
pub struct BurstFigures {
    pub bin: String,
    pub followers: usize,
    pub events: usize,
    /// Append acknowledgement → delivery, every (follower, event), sorted, ns.
    pub latencies: Vec<u64>,
    /// (peak RSS during the burst − RSS before the streams were opened) / followers, KiB.
    pub kib_per_stream: f64,
    /// The daemon's RSS halfway through the burst, KiB.
    pub mid_rss_kib: u64,
    /// The daemon's RSS before the followers opened their streams, KiB.
    pub before_rss_kib: u64,
    /// The daemon's RSS once every follower was open (had its `up_to_date`), before the
    /// first append, KiB.
    pub open_rss_kib: u64,
    /// Appends per second of the writer.
    pub append_rate: f64,
    pub wrong: usize,
}

impl BurstFigures {
    pub fn quantile(&self, p: f64) -> Duration {
        super::stream::quantile(&self.latencies, p)
    }
}

/// One round against a fresh daemon of `s.bin`.
pub async fn run(
    s: &Setup<'_>,
    followers: usize,
    events: usize,
    bytes: (usize, usize),
) -> anyhow::Result<BurstFigures> {
    let token = Rng::new(u64::from_str_radix(s.tag, 16).unwrap_or(7)).hex64();
    let (target, _, _dir) = namespaces::spawn(s, "burst", "", &token)
        .with_context(|| format!("starting {}", s.bin.display()))?;
    let pid = target.pid.context("a started daemon has a pid")?;
    let api = api_token(&token);
    let (agent, runs) = setup(&target, s.tag, 1).await?;
    let run = runs[0].clone();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = rss_kib(pid).map(|r| r.0).unwrap_or(0);
    let epoch = Instant::now();
    let mut tasks = Vec::with_capacity(followers);
    for _ in 0..followers {
        let mut f = Follower::open(&target, &api, &run).await?;
        let (id, data) = f.next().await?.context("the stream ended at once")?;
        anyhow::ensure!(
            id.is_none() && data["type"] == "up_to_date",
            "a stream of a new run starts with up_to_date, got {data}"
        );
        tasks.push(tokio::spawn(async move {
            // (seq, arrival ns since epoch), in arrival order.
            let mut got: Vec<(u64, u64)> = Vec::with_capacity(events + 2);
            while let Some((id, data)) = f.next().await? {
                let Some(id) = id else { continue };
                got.push((id, epoch.elapsed().as_nanos() as u64));
                if data["type"] == "completed" {
                    break;
                }
            }
            anyhow::Ok(got)
        }));
    }
    let open_rss_kib = rss_kib(pid).map(|r| r.0).unwrap_or(0);
    reset_peak(pid);
    // The writer: `request`, then the events back to back, then the terminal status. One
    // connection, so seq k is the k-th append; acks[k] is when its answer came.
    let acks = Arc::new(Mutex::new(vec![0u64; events + 3]));
    let mut conn = Conn::connect(target.ep.clone()).await?;
    let mut rng = Rng::new(events as u64);
    let started = Instant::now();
    let mut mid_rss_kib = 0;
    call(
        &mut conn,
        status_append(&agent, &run, r#"{"type":"request"}"#),
    )
    .await?;
    acks.lock().unwrap()[1] = epoch.elapsed().as_nanos() as u64;
    for i in 0..events {
        let pad = "x".repeat(rng.range(bytes.0, bytes.1));
        // A model's streamed output, as the SDK stores it (`thinking`: mapped to a step by
        // every binary). An event of a type no SDK writes would leave the run's prompt
        // unsettled until 32 events are stored, and every follower's `run_started` with it.
        let msg = format!(r#"{{"type":"thinking","text":"{i} {pad}"}}"#);
        call(&mut conn, status_append(&agent, &run, &msg)).await?;
        acks.lock().unwrap()[i + 2] = epoch.elapsed().as_nanos() as u64;
        if i + 1 == events / 2 {
            mid_rss_kib = rss_kib(pid).map(|r| r.0).unwrap_or(0);
        }
    }
    let finished = r#"{"type":"status","status":"FINISHED"}"#;
    call(&mut conn, status_append(&agent, &run, finished)).await?;
    let append_rate = (events + 2) as f64 / started.elapsed().as_secs_f64();
    let acks = acks.lock().unwrap().clone();
    let mut latencies = Vec::with_capacity(followers * events);
    let mut wrong = 0;
    for t in tasks {
        let got = tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .context("a follower did not finish")???;
        let want = (1..=events as u64 + 2).collect::<Vec<_>>();
        if got.iter().map(|g| g.0).collect::<Vec<_>>() != want {
            wrong += 1;
        }
        for (seq, at) in got {
            if (2..=events as u64 + 1).contains(&seq) {
                // Delivered before the writer read its answer: no wait at all.
                latencies.push(at.saturating_sub(acks[seq as usize]));
            }
        }
    }
    let peak = rss_kib(pid).map(|r| r.1).unwrap_or(0);
    latencies.sort_unstable();
    Ok(BurstFigures {
        bin: s.bin.display().to_string(),
        followers,
        events,
        latencies,
        kib_per_stream: peak.saturating_sub(before) as f64 / followers.max(1) as f64,
        mid_rss_kib,
        before_rss_kib: before,
        open_rss_kib,
        append_rate,
        wrong,
    })
}

/// The rounds as a table (one row per round and binary, in the order they ran): each row
/// with followers, and `alone` the same round's burst without any (same binary).
pub fn print(rows: &[(BurstFigures, BurstFigures)]) {
    println!();
    println!("burst: 1 run, one writer appending back to back, a fresh daemon per burst");
    println!(
        "| binary | followers × events | p50 | p99 | KiB per stream mid-burst (with − baseline) | KiB per stream open, before the burst | RSS mid-burst with / baseline | whole-daemon growth per stream (peak) | appends/s | baseline appends/s | wrong |"
    );
    println!("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    for (r, alone) in rows {
        println!(
            "| {} | {} × {} | {:.2} ms | {:.2} ms | {:.1} | {:.1} | {:.1} / {:.1} MiB | {:.1} | {:.0} | {:.0} | {} |",
            r.bin,
            r.followers,
            r.events,
            r.quantile(0.5).as_secs_f64() * 1e3,
            r.quantile(0.99).as_secs_f64() * 1e3,
            per_stream(r, alone),
            per_stream_open(r, alone),
            r.mid_rss_kib as f64 / 1024.0,
            alone.mid_rss_kib as f64 / 1024.0,
            r.kib_per_stream,
            r.append_rate,
            alone.append_rate,
            r.wrong
        );
    }
}

/// KiB of daemon RSS per open stream halfway through the burst: with the followers minus
/// with the baseline's, over the difference in followers.
pub fn per_stream(with: &BurstFigures, base: &BurstFigures) -> f64 {
    per_more(with, base, with.mid_rss_kib, base.mid_rss_kib)
}

/// KiB of daemon RSS per open stream once the followers are open, before the burst: each
/// daemon's growth from its RSS before the streams, with minus baseline, per further stream.
pub fn per_stream_open(with: &BurstFigures, base: &BurstFigures) -> f64 {
    let grew = |f: &BurstFigures| f.open_rss_kib.saturating_sub(f.before_rss_kib);
    per_more(with, base, grew(with), grew(base))
}

/// (`w` − `b`) KiB over the difference in followers.
fn per_more(with: &BurstFigures, base: &BurstFigures, w: u64, b: u64) -> f64 {
    (w as f64 - b as f64) / with.followers.saturating_sub(base.followers).max(1) as f64
}
