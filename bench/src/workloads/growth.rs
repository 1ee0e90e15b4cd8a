//! `growth` (issue 26): how the daemon behaves as its store grows. One daemon, one store,
//! filled cumulatively to each size of `--growth-sizes` (the daemon stopped while
//! [`growth_fill`](super::growth_fill) writes straight into its tables, then started again),
//! and at each size, against that daemon:
//!
//! - append ×1 and ×16 on fresh runs (checked as `append` checks them);
//! - replay of one 1,000-event run written among the filler (checked page by page);
//! - `agents.list` of a 250-agent workspace, 5 pages (checked as `agents-list` checks them);
//! - `GET /v1/runs?status=finished&limit=50` and its next page (the run API, newest first:
//!   checked for order, status and no repeats);
//! - bytes on disk per stored event, and how long `callbackd prune --dry-run` and (SQLite)
//!   `callbackd backup` take against the live store.
//!
//! The figures that should not grow with the store (append p99, replay rate) are compared
//! with the smallest size's in the report.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::growth_fill::{self as fill, Layout, Store, EVENTS_PER_RUN};
use super::{agents_list, append, replay, Measured};
use crate::client::ApiConn;
use crate::gen::Payloads;
use crate::target::{self, Spawn, Target};

/// Events of the replay run.
const REPLAY_EVENTS: u64 = 1000;
/// Agents of the listed workspace (5 pages of 50).
const LIST_AGENTS: usize = 250;
/// Pages of `GET /v1/runs` read per pass (the first and the next).
const RUN_PAGES: usize = 2;

pub struct Growth<'a> {
    pub bin: &'a Path,
    /// `--db` of the daemon (a file, or the PostgreSQL URL) and its config file.
    pub db: &'a Path,
    pub config: &'a Path,
    pub token: &'a str,
    pub store: Store,
    pub tag: &'a str,
    pub sizes: Vec<u64>,
    /// Sizes above which `backup` is not timed.
    pub backup_max: u64,
    /// Timed passes over the replay run, the agents list and the runs list.
    pub passes: usize,
    /// Times each phase runs at each size; the row shows the median one (appends by p99,
    /// reads by rate), so one noisy moment of this shared machine does not make a size's
    /// figure.
    pub reps: usize,
    /// Appends per client count (runs of 100 events).
    pub append_runs: [(usize, usize); 2],
    pub scratch: &'a Path,
}

/// One size's figures.
pub struct GrowthRow {
    pub target: u64,
    pub events: u64,
    pub runs: u64,
    pub fill: Duration,
    pub ready: Duration,
    pub append: Vec<(usize, Measured)>,
    pub replay: Measured,
    pub agents: Measured,
    pub runs_list: Option<Measured>,
    pub disk: u64,
    /// An append to the newest filled run, which must number it one after the filled ones
    /// (the daemon continues a filled run as one it wrote: PostgreSQL's `run_seqs`).
    pub continued: Result<(), String>,
    pub prune: Result<Duration, String>,
    pub backup: Option<Result<Duration, String>>,
}

impl GrowthRow {
    pub fn failures(&self) -> u64 {
        let m = |m: &Measured| m.errors + m.wrong;
        self.append.iter().map(|(_, a)| m(a)).sum::<u64>()
            + m(&self.replay)
            + m(&self.agents)
            + self.runs_list.as_ref().map_or(0, m)
            + u64::from(self.continued.is_err())
            + u64::from(self.prune.is_err())
            + u64::from(matches!(self.backup, Some(Err(_))))
    }
}

fn spawn(g: &Growth<'_>) -> anyhow::Result<(Target, Duration)> {
    target::spawn_callbackd(&Spawn {
        bin: g.bin,
        db: g.db,
        config: Some(g.config),
        token: g.token,
    })
}

/// Runs the workload on `server` (a daemon started on an empty store, which it stops and
/// starts again around each fill); returns the daemon running on the largest store and the
/// rows.
pub async fn run(mut server: Target, g: &Growth<'_>) -> anyhow::Result<(Target, Vec<GrowthRow>)> {
    let max = g.sizes.iter().copied().max().unwrap_or(0);
    let layout = Layout::new(g.tag, max / EVENTS_PER_RUN + 1, super::now_ms());
    // The listed workspace, written through the daemon (the bridge's agents.create); a tag
    // of its own, as the agents-list workload may have run on the same daemon before.
    let list_tag = format!("{}-growth", g.tag);
    let setup = agents_list::setup(&server, &list_tag, LIST_AGENTS, super::now_ms()).await?;
    anyhow::ensure!(
        setup.errors + setup.wrong == 0,
        "growth: creating the listed agents failed: {:?}",
        setup.examples
    );
    let payloads = Arc::new(Payloads::new(1, 256, (500, 3000)));
    let api = target::api_token(g.token);
    let mut rows = Vec::new();
    // Run 0 is the replay run; filled runs follow from 1.
    let mut next_run: u64 = 0;
    for (i, &size) in g.sizes.iter().enumerate() {
        drop(server);
        let t = Instant::now();
        let have = fill::count_events(&g.store).await?;
        if next_run == 0 {
            fill::fill_one(&g.store, &layout, 0, REPLAY_EVENTS).await?;
            next_run = 1;
        }
        let have = have.max(fill::count_events(&g.store).await?);
        let more = size.saturating_sub(have) / EVENTS_PER_RUN;
        eprintln!(
            "  growth: filling {more} runs ({} events) towards {size}",
            more * EVENTS_PER_RUN
        );
        fill::fill(&g.store, &layout, next_run, next_run + more).await?;
        next_run += more;
        let fill_time = t.elapsed();
        let (s, ready) = spawn(g)?;
        server = s;
        let events = fill::count_events(&g.store).await?;
        eprintln!(
            "  growth: {events} events in {:.1} s of filling, ready in {:.0} ms",
            fill_time.as_secs_f64(),
            ready.as_secs_f64() * 1e3
        );

        let continued = continue_run(&server, &layout, next_run - 1).await?;
        let replay_id = layout.run_id(0);
        let (mut replays, mut lists, mut finds) = (Vec::new(), Vec::new(), Vec::new());
        let mut appends: Vec<Vec<Measured>> = vec![Vec::new(); g.append_runs.len()];
        for rep in 0..g.reps.max(1) {
            replays.push(replay::run(&server, &replay_id, REPLAY_EVENTS, g.passes, true).await?);
            lists.push(
                agents_list::run(&server, &list_tag, LIST_AGENTS, g.passes, None, true)
                    .await?
                    .0,
            );
            if let Some(m) = runs_list(&server, &api, g.passes).await? {
                finds.push(m);
            }
            for (k, &(clients, runs)) in g.append_runs.iter().enumerate() {
                let a = Arc::new(append::Append {
                    tag: g.tag.to_string(),
                    runs,
                    events: 100,
                    payloads: payloads.clone(),
                    auth: Vec::new(),
                    scatter: true,
                    finish: false,
                });
                let label = format!("g{i}a{k}r{rep}");
                appends[k].push(append::run(&server, &a, &label, clients, true).await?);
            }
        }
        let replay = median(replays, |m| m.rate());
        let agents = median(lists, |m| m.rate());
        let runs_list = (!finds.is_empty()).then(|| median(finds, rate));
        let appended: Vec<(usize, Measured)> = g
            .append_runs
            .iter()
            .zip(appends)
            .map(|(&(clients, _), ms)| (clients, median(ms, |m| m.quantile(0.99).as_secs_f64())))
            .collect();

        let disk = fill::disk_bytes(&g.store).await?;
        let stored = fill::count_events(&g.store).await?;
        let prune = timed(g, "prune", &["--older-than", "30d", "--dry-run"]);
        let backup = match (&g.store, size <= g.backup_max) {
            (Store::Sqlite(_), true) => {
                let copy = g.scratch.join("growth-backup.db");
                let r = timed(g, "backup", &[copy.to_str().unwrap_or_default()]);
                let _ = std::fs::remove_file(&copy);
                Some(r)
            }
            _ => None,
        };
        let row = GrowthRow {
            target: size,
            events: stored,
            runs: next_run,
            fill: fill_time,
            ready,
            append: appended,
            replay,
            agents,
            runs_list,
            disk,
            continued,
            prune,
            backup,
        };
        eprintln!("  growth: {}", summary(&row));
        rows.push(row);
    }
    Ok((server, rows))
}

/// The median of the repeats by `key`; every repeat's failures go with it.
fn median(mut ms: Vec<Measured>, key: impl Fn(&Measured) -> f64) -> Measured {
    ms.sort_by(|a, b| key(a).total_cmp(&key(b)));
    let (errors, wrong): (u64, u64) = (
        ms.iter().map(|m| m.errors).sum(),
        ms.iter().map(|m| m.wrong).sum(),
    );
    let examples: Vec<String> = ms.iter().flat_map(|m| m.examples.clone()).take(3).collect();
    let mut m = ms.swap_remove(ms.len() / 2);
    m.errors = errors;
    m.wrong = wrong;
    m.examples = examples;
    m
}

/// Appends one event to filled run `r` (untimed); it must get seq 101 (1,001 for the
/// replay run, which is left alone: its pages are checked against exactly 1,000 events).
async fn continue_run(server: &Target, l: &Layout, r: u64) -> anyhow::Result<Result<(), String>> {
    if r == 0 {
        return Ok(Ok(()));
    }
    let (agent, run) = (l.agent_of(r), l.run_id(r));
    let mut conn = crate::client::Conn::connect(server.ep.clone()).await?;
    let body = crate::gen::status_append(&agent, &run, r#"{"type":"status","status":"RUNNING"}"#);
    let (status, answer) = conn.call(bytes::Bytes::from(body)).await?;
    let want = EVENTS_PER_RUN + 1;
    let got = super::output(&answer)
        .ok()
        .flatten()
        .and_then(|o| o["seq"].as_u64());
    Ok(if status.is_success() && got == Some(want) {
        Ok(())
    } else {
        Err(format!(
            "an append to filled run {run} answered {status} seq {got:?} (expected {want}): {}",
            String::from_utf8_lossy(&answer[..answer.len().min(200)])
        ))
    })
}

/// Runs `callbackd <cmd> --db DB --config CONFIG <args>` against the live store; its time.
fn timed(g: &Growth<'_>, cmd: &str, args: &[&str]) -> Result<Duration, String> {
    let started = Instant::now();
    let out = Command::new(g.bin)
        .arg(cmd)
        .arg("--db")
        .arg(g.db)
        .arg("--config")
        .arg(g.config)
        .args(args)
        .env_remove("CALLBACKD_CONFIG")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    let took = started.elapsed();
    if !out.status.success() {
        return Err(format!(
            "{cmd} exited {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    eprintln!(
        "  growth: {cmd} took {:.2} s: {}",
        took.as_secs_f64(),
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .replace('\n', " / ")
    );
    Ok(took)
}

/// `GET /v1/runs?status=finished&limit=50` and the page after it, `passes` times. Checked:
/// runs newest first (`created_at`, then `run_id`, descending), every one `finished`, no run
/// twice, a `next_cursor` exactly when the page is full; later passes the same pages.
async fn runs_list(server: &Target, api: &str, passes: usize) -> anyhow::Result<Option<Measured>> {
    let mut conn = ApiConn::connect(&server.ep, api).await?;
    let mut m = Measured::default();
    let mut reference: Vec<bytes::Bytes> = Vec::new();
    let started = Instant::now();
    for pass in 0..=passes {
        let mut cursor: Option<String> = None;
        let mut seen: Vec<(String, String)> = Vec::new();
        for p in 0..RUN_PAGES {
            let path = match &cursor {
                None => "/v1/runs?status=finished&limit=50".to_string(),
                Some(c) => format!("/v1/runs?status=finished&limit=50&cursor={c}"),
            };
            let t = Instant::now();
            let (status, body) = conn.get(&path).await?;
            if pass > 0 {
                m.latencies.push(t.elapsed().as_nanos() as u64);
            }
            if status == http::StatusCode::UNAUTHORIZED && pass == 0 && p == 0 {
                eprintln!("  growth: the run API refused the API token; no runs-list figures");
                return Ok(None);
            }
            if status != http::StatusCode::OK {
                m.errors += 1;
                m.examples.push(format!("GET {path}: {status} {body:?}"));
                break;
            }
            if pass > 0 {
                if reference.get(p) != Some(&body) {
                    m.wrong(format!(
                        "pass {pass} page {p} differs from the checked read"
                    ));
                }
                // The next page's cursor is the checked read's.
                cursor = next_cursor(&body).ok().flatten();
                if cursor.is_none() {
                    break;
                }
                continue;
            }
            match check_runs_page(&body, &mut seen) {
                Ok(next) => {
                    reference.push(body);
                    cursor = next;
                    if cursor.is_none() {
                        break;
                    }
                }
                Err(e) => {
                    m.wrong(format!("page {p}: {e}"));
                    break;
                }
            }
        }
        if pass == 0 && seen.is_empty() {
            m.wrong("no finished run listed".into());
        }
    }
    m.calls = m.latencies.len();
    m.wall = started.elapsed();
    m.latencies.sort_unstable();
    // Time of the timed passes only: the wall clock would count the checked read.
    let busy: u64 = m.latencies.iter().sum();
    m.wall = Duration::from_nanos(busy);
    Ok(Some(m))
}

fn next_cursor(body: &[u8]) -> Result<Option<String>, String> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    Ok(v["next_cursor"]
        .as_str()
        .filter(|c| !c.is_empty())
        .map(str::to_string))
}

fn check_runs_page(
    body: &[u8],
    seen: &mut Vec<(String, String)>,
) -> Result<Option<String>, String> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let runs = v["runs"].as_array().ok_or("no runs")?;
    for r in runs {
        let id = r["run_id"].as_str().ok_or("a run without run_id")?;
        let created = r["created_at"].as_str().ok_or("a run without created_at")?;
        if r["status"] != "finished" {
            return Err(format!("run {id} has status {}", r["status"]));
        }
        let key = (created.to_string(), id.to_string());
        if let Some(prev) = seen.last() {
            if *prev <= key {
                return Err(format!(
                    "run {id} is not after {} in newest-first order",
                    prev.1
                ));
            }
        }
        seen.push(key);
    }
    let next = next_cursor(body)?;
    if runs.len() < 50 && next.is_some() {
        return Err(format!("a page of {} runs has a next_cursor", runs.len()));
    }
    Ok(next)
}

fn rate(m: &Measured) -> f64 {
    m.calls as f64 / m.wall.as_secs_f64().max(1e-9)
}

fn ms(d: Duration) -> String {
    if d < Duration::from_millis(1) {
        format!("{} µs", d.as_micros())
    } else {
        format!("{:.2} ms", d.as_secs_f64() * 1e3)
    }
}

fn secs(r: &Result<Duration, String>) -> String {
    match r {
        Ok(d) => format!("{:.2} s", d.as_secs_f64()),
        Err(_) => "failed".into(),
    }
}

fn summary(r: &GrowthRow) -> String {
    let a: Vec<String> = r
        .append
        .iter()
        .map(|(c, m)| {
            format!(
                "append ×{c} {:.0}/s p99 {} max {}",
                m.rate(),
                ms(m.quantile(0.99)),
                ms(m.quantile(1.0))
            )
        })
        .collect();
    format!(
        "{} events: {}; replay {:.0} pages/s; agents-list {:.0} pages/s; runs-list {}; {:.0} B/event",
        r.events,
        a.join(", "),
        r.replay.rate(),
        r.agents.rate(),
        r.runs_list
            .as_ref()
            .map_or("–".into(), |m| format!("{:.0} pages/s", rate(m))),
        r.disk as f64 / r.events.max(1) as f64
    )
}

/// The growth table (markdown) and the ratios of the largest size to the smallest.
pub fn print(rows: &[GrowthRow], backend: &str) {
    println!();
    println!("### growth ({backend}): one daemon, its store filled to each size");
    println!();
    println!("| size | events stored | runs | fill | start to ready | append ×1 /s | ×1 p50 | ×1 p99 | ×1 max | append ×16 /s | ×16 p50 | ×16 p99 | ×16 max | replay pages/s | replay p99 | agents.list pages/s | p99 | GET /v1/runs pages/s | p99 | bytes on disk | bytes/event | prune --dry-run | backup | errors |");
    println!(
        "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
    );
    for r in rows {
        let app = |c: usize| {
            r.append.iter().find(|(k, _)| *k == c).map_or(
                "– | – | – | –".to_string(),
                |(_, m)| {
                    format!(
                        "{:.0} | {} | {} | {}",
                        m.rate(),
                        ms(m.quantile(0.5)),
                        ms(m.quantile(0.99)),
                        ms(m.quantile(1.0))
                    )
                },
            )
        };
        println!(
            "| {} | {} | {} | {:.1} s | {:.0} ms | {} | {} | {:.0} | {} | {:.0} | {} | {} | {} | {} | {:.0} | {} | {} | {} |",
            r.target,
            r.events,
            r.runs,
            r.fill.as_secs_f64(),
            r.ready.as_secs_f64() * 1e3,
            app(1),
            app(16),
            r.replay.rate(),
            ms(r.replay.quantile(0.99)),
            r.agents.rate(),
            ms(r.agents.quantile(0.99)),
            r.runs_list
                .as_ref()
                .map_or("– (no API token)".into(), |m| format!("{:.0}", rate(m))),
            r.runs_list
                .as_ref()
                .map_or("–".into(), |m| ms(m.quantile(0.99))),
            r.disk,
            r.disk as f64 / r.events.max(1) as f64,
            secs(&r.prune),
            r.backup.as_ref().map_or("–".into(), secs),
            r.failures(),
        );
    }
    if let (Some(first), Some(last)) = (rows.first(), rows.last()) {
        if rows.len() > 1 {
            println!();
            for c in [1, 16] {
                let p99 = |r: &GrowthRow| {
                    r.append
                        .iter()
                        .find(|(k, _)| *k == c)
                        .map(|(_, m)| m.quantile(0.99).as_secs_f64())
                };
                if let (Some(a), Some(b)) = (p99(first), p99(last)) {
                    println!(
                        "- append ×{c} p99 at {} ÷ at {}: {:.2} (issue 26: ≤ 1.5)",
                        last.events,
                        first.events,
                        b / a.max(1e-9)
                    );
                }
                // A fresh run's first append finds its place in the event index (a page
                // that may have to come from disk once the store outgrows the page cache);
                // the later ones find it cached. One in `events per run` is a first.
                let split = |r: &GrowthRow| {
                    r.append.iter().find(|(k, _)| *k == c).map(|(_, m)| {
                        let q = |v: &[u64]| {
                            let rank =
                                ((0.99 * v.len() as f64).ceil() as usize).clamp(1, v.len().max(1));
                            v.get(rank - 1).copied().unwrap_or(0) as f64 / 1e9
                        };
                        (q(&m.first_of_run), q(&m.later_in_run))
                    })
                };
                if let (Some((fa, la)), Some((fb, lb))) = (split(first), split(last)) {
                    println!(
                        "  of which runs' first appends: p99 {:.2} → {:.2} ms ({:.2}×); the later ones: p99 {:.2} → {:.2} ms ({:.2}×)",
                        fa * 1e3,
                        fb * 1e3,
                        fb / fa.max(1e-9),
                        la * 1e3,
                        lb * 1e3,
                        lb / la.max(1e-9)
                    );
                }
            }
            println!(
                "- replay rate at {} ÷ at {}: {:.2} (issue 26: ≥ 1/1.5 = 0.67)",
                last.events,
                first.events,
                last.replay.rate() / first.replay.rate().max(1e-9)
            );
        }
    }
    for r in rows {
        for (c, m) in &r.append {
            for e in &m.examples {
                println!("  growth {} append ×{c}: {e}", r.events);
            }
        }
        for (what, m) in [
            ("replay", Some(&r.replay)),
            ("agents.list", Some(&r.agents)),
            ("runs list", r.runs_list.as_ref()),
        ] {
            for e in m.iter().flat_map(|m| &m.examples) {
                println!("  growth {} {what}: {e}", r.events);
            }
        }
        if let Err(e) = &r.continued {
            println!("  growth {}: {e}", r.events);
        }
        for (what, x) in [("prune", Some(&r.prune)), ("backup", r.backup.as_ref())] {
            if let Some(Err(e)) = x {
                println!("  growth {} {what}: {e}", r.events);
            }
        }
    }
}

/// The scratch SQLite file of a started daemon (for the filler), or the PostgreSQL schema.
pub fn store_of(db: &Path, pg_schema: Option<String>) -> Store {
    match pg_schema {
        Some(schema) => Store::Postgres {
            url: db.to_string_lossy().into_owned(),
            schema,
        },
        None => Store::Sqlite(PathBuf::from(db)),
    }
}

/// Removes the PostgreSQL schema a growth run filled (SQLite's file goes with the scratch
/// directory).
pub async fn cleanup(store: &Store) -> anyhow::Result<()> {
    if let Store::Postgres { url, schema } = store {
        fill::pg_drop(url, schema)
            .await
            .with_context(|| format!("dropping schema {schema}"))?;
    }
    Ok(())
}
