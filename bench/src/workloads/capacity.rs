//! `capacity` (issue 39): how many bridges one daemon serves. N simulated bridges, each
//! playing the `turn` workload's turns (CreateAgent + Send, 139 store calls, 100 events of
//! which a quarter are completed tool calls) at a human pace: the turn's events streamed with
//! a gap between them (the model's pace), a pause between turns (the person reading and
//! typing), every bridge starting at a random point of that pause. M followers per bridge
//! open the run API stream of each turn's run as soon as its document exists.
//!
//! One step is N bridges for a fixed time (each finishes the turn it is in). It passes when
//! the p99 of the bridges' store calls is at most 5 ms, no call failed or was answered
//! wrongly (the `turn` workload's checks), and no stream lost anything: every follower got
//! every seq of its run (1..=100) exactly once, in order, ending with `completed`. With the
//! null server, each step is followed by the same paced calls (no followers, no checks)
//! against it: its p99 is what the machine's loopback and scheduler alone give at that
//! moment, which on a shared machine can be over 5 ms by itself. The sweep doubles N from 1
//! until a step's median is over the limit (the daemon is saturated: a p99 over it alone
//! can be one stall of the machine or the disk, and the next step may pass), or something
//! failed or was lost, then tries the midpoint between the largest pass and the next N
//! once, for each M.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use super::stream::Follower;
use super::turn::{Pace, Turn, Turns};
use super::{measure, Measured};
use crate::client::{Conn, Recorder};
use crate::gen::Rng;
use crate::target::Target;

/// The pass line for the store calls' p99.
pub const P99_LIMIT: Duration = Duration::from_millis(5);

/// The shape of every step.
pub struct Capacity {
    pub turns: Arc<Turns>,
    /// The run API token (followers).
    pub api_token: String,
    /// Between two streamed events, ms (uniform in the range).
    pub gap_ms: (usize, usize),
    /// Between two turns of a bridge, ms (uniform in the range); also the spread of starts.
    pub think_ms: (usize, usize),
    /// How long a step starts turns.
    pub step: Duration,
    /// Bridges at most (the sweep stops there even when every step passes).
    pub max_bridges: usize,
}

/// What one step measured.
pub struct Step {
    /// The same paced calls against the null server (no followers).
    pub null: Option<Measured>,
    pub bridges: usize,
    pub followers: usize,
    pub m: Measured,
    pub turns: usize,
    pub streams: usize,
    /// Streams that failed, or did not get every seq exactly once in order.
    pub lost: usize,
    pub example: Option<String>,
}

impl Step {
    pub fn passed(&self) -> bool {
        self.m.errors == 0
            && self.m.wrong == 0
            && self.lost == 0
            && self.m.quantile(0.99) <= P99_LIMIT
    }
}

type Streams = Arc<Mutex<Vec<JoinHandle<anyhow::Result<bool>>>>>;

/// One follower: true when it got seqs 1..=100 exactly once, in order, the last `completed`.
async fn follow(addr: SocketAddr, token: String, run: String) -> anyhow::Result<bool> {
    let mut f = Follower::open_at(addr, &token, &run).await?;
    let mut next = 1u64;
    while let Some((id, data)) = f.next().await? {
        let Some(id) = id else { continue };
        if id != next {
            return Ok(false);
        }
        next += 1;
        if data["type"] == "completed" {
            break;
        }
    }
    Ok(next == 101)
}

/// One step: `bridges` bridges, `followers` followers of each turn's run.
pub async fn step(
    target: &Target,
    null: Option<&Target>,
    c: &Arc<Capacity>,
    label: &str,
    bridges: usize,
    followers: usize,
) -> anyhow::Result<Step> {
    let mut s = paced(target, c, label, bridges, followers, true).await?;
    if let Some(null) = null {
        s.null = Some(paced(null, c, label, bridges, 0, false).await?.m);
    }
    Ok(s)
}

/// `bridges` bridges playing paced turns against `target` for one step.
async fn paced(
    target: &Target,
    c: &Arc<Capacity>,
    label: &str,
    bridges: usize,
    followers: usize,
    verify: bool,
) -> anyhow::Result<Step> {
    let deadline = Instant::now() + c.step;
    let streams: Streams = Arc::new(Mutex::new(Vec::new()));
    let addr = target.ep.addr;
    let label = Arc::new(label.to_string());
    let (m, turns) = measure(target, bridges, |b, mut conn: Conn| {
        let (c, label, streams) = (c.clone(), label.clone(), streams.clone());
        async move {
            let mut rec = Recorder::default();
            let token = c.api_token.clone();
            let pace = Pace {
                gap_ms: c.gap_ms,
                on_run: Box::new(move |run: &str| {
                    let mut s = streams.lock().unwrap();
                    for _ in 0..followers {
                        s.push(tokio::spawn(follow(addr, token.clone(), run.to_string())));
                    }
                }),
            };
            let mut rng = Rng::new(0x6361_7061 ^ b as u64);
            let pause =
                |rng: &mut Rng| Duration::from_millis(rng.range(c.think_ms.0, c.think_ms.1) as u64);
            // Bridges start spread over one pause, not in step.
            tokio::time::sleep(pause(&mut rng) / 2).await;
            let mut turns = 0;
            while Instant::now() < deadline {
                let mut turn = Turn {
                    conn: &mut conn,
                    rec: &mut rec,
                    verify,
                    pace: Some(&pace),
                };
                turn.play(&c.turns, &format!("{label}b{b}"), turns).await;
                turns += 1;
                tokio::time::sleep(pause(&mut rng)).await;
            }
            (rec, turns)
        }
    })
    .await?;
    let handles = std::mem::take(&mut *streams.lock().unwrap());
    let (streams, mut lost, mut example) = (handles.len(), 0, None);
    for h in handles {
        match tokio::time::timeout(Duration::from_secs(30), h).await {
            Ok(Ok(Ok(true))) => {}
            Ok(Ok(Ok(false))) => {
                lost += 1;
                example.get_or_insert_with(|| "a stream missed or repeated a seq".to_string());
            }
            Ok(Ok(Err(e))) => {
                lost += 1;
                example.get_or_insert_with(|| format!("a stream failed: {e:#}"));
            }
            Ok(Err(e)) => {
                lost += 1;
                example.get_or_insert_with(|| format!("a follower task: {e}"));
            }
            Err(_) => {
                lost += 1;
                example.get_or_insert_with(|| "a stream did not end within 30 s".to_string());
            }
        }
    }
    Ok(Step {
        null: None,
        bridges,
        followers,
        turns: turns.iter().sum(),
        m,
        streams,
        lost,
        example,
    })
}

/// The sweep for each follower count; every step in the order it ran.
pub async fn sweep(
    target: &Target,
    null: Option<&Target>,
    c: &Arc<Capacity>,
    tag: &str,
    follower_counts: &[usize],
) -> anyhow::Result<Vec<Step>> {
    let mut steps = Vec::new();
    for &m in follower_counts {
        let (mut pass, mut next) = (None::<usize>, None::<usize>);
        let mut n = 1;
        while n <= c.max_bridges {
            let s = step(target, null, c, &format!("{tag}m{m}n{n}"), n, m).await?;
            eprintln!("{}", row(&s));
            let (ok, over) = (
                s.passed(),
                s.m.errors + s.m.wrong > 0 || s.lost > 0 || s.m.quantile(0.5) > P99_LIMIT,
            );
            steps.push(s);
            if ok {
                pass = Some(n);
            } else if pass.is_some() && next.is_none() {
                next = Some(n);
            }
            if over {
                break;
            }
            n *= 2;
        }
        if let (Some(p), Some(f)) = (pass, next.or((n <= c.max_bridges).then_some(n))) {
            let mid = (p + f) / 2;
            if mid > p && !steps.iter().any(|s| s.followers == m && s.bridges == mid) {
                let s = step(target, null, c, &format!("{tag}m{m}n{mid}"), mid, m).await?;
                eprintln!("{}", row(&s));
                steps.push(s);
            }
        }
    }
    Ok(steps)
}

fn row(s: &Step) -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let cpu = |d: Option<Duration>| {
        d.map_or("–".to_string(), |d| {
            format!("{:.0} %", 100.0 * d.as_secs_f64() / s.m.wall.as_secs_f64())
        })
    };
    format!(
        "| {} | {} | {} | {} | {:.0} | {:.2} ms | {:.2} ms | {:.2} ms | {} | {} / {} | {} | {} | {} | {} | {} |",
        s.followers,
        s.bridges,
        s.turns,
        s.m.calls,
        s.m.rate(),
        ms(s.m.quantile(0.5)),
        ms(s.m.quantile(0.99)),
        ms(s.m.quantile(1.0)),
        s.null.as_ref().map_or("–".to_string(), |n| format!(
            "{:.2} / {:.2} ms",
            ms(n.quantile(0.5)),
            ms(n.quantile(0.99))
        )),
        s.m.errors,
        s.m.wrong,
        s.streams,
        s.lost,
        cpu(s.m.server_cpu),
        cpu(s.m.loadgen_cpu),
        if s.passed() { "yes" } else { "**no**" },
    )
}

/// The steps as a table, and the largest passing N per follower count.
pub fn print(backend: &str, c: &Capacity, steps: &[Step]) {
    println!();
    println!(
        "capacity on {backend}: paced turns (events {}–{} ms apart, {}–{} ms between turns), {} s a step; pass: store-call p99 ≤ {} ms, no error, no stream lost",
        c.gap_ms.0,
        c.gap_ms.1,
        c.think_ms.0,
        c.think_ms.1,
        c.step.as_secs(),
        P99_LIMIT.as_millis()
    );
    println!("| followers per bridge | bridges | turns | store calls | calls/s | p50 | p99 | max | null p50 / p99 | errors / wrong | streams | lost | daemon CPU | bench CPU | pass |");
    println!("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|");
    for s in steps {
        println!("{}", row(s));
        if let Some(e) = s.m.examples.first().or(s.example.as_ref()) {
            println!("  (e.g. {e})");
        }
    }
    let mut ms: Vec<usize> = steps.iter().map(|s| s.followers).collect();
    ms.dedup();
    for m in ms {
        let best = steps
            .iter()
            .filter(|s| s.followers == m && s.passed())
            .map(|s| s.bridges)
            .max();
        match best {
            Some(n) => println!("{backend}, {m} followers per bridge: largest N that passed: {n}"),
            None => println!("{backend}, {m} followers per bridge: no step passed"),
        }
    }
}
