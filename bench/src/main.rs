//! `callbackd-bench`: the load generator for store callback servers (issue 5).
//!
//! By default it starts `target/release/callbackd` on a scratch database and a null server
//! (this binary's `null-server` mode, in its own process), runs each workload against both
//! in turn, and prints every figure with its ratio to the null server's: the null server is
//! the ceiling of HTTP/1.1 on this machine's loopback, so the ratios hold across machines
//! and across noise that figures alone do not survive. `--url/--token` benchmark any other
//! server speaking the contract (`--pid` adds its CPU and memory figures).
//!
//! Layout: `client` (keep-alive hyper connections, bridge-shaped chunked requests),
//! `target` (spawning the servers, /proc sampling), `null_server`, `gen` (payloads and
//! documents), `workloads/*` (one file per workload, each checking the answers), `report`.

mod client;
mod gen;
mod null_server;
mod report;
mod target;
mod workloads;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};

use report::{Report, Row};
use target::{rss_kib, ScratchDir, Spawn, Target};
use workloads::{agents_list, append, now_ms, replay, turn, Measured};

#[derive(Parser)]
#[command(
    name = "callbackd-bench",
    about = "Benchmark a store callback server against the null server on this machine"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Sub>,
    #[command(flatten)]
    opts: Opts,
}

#[derive(Subcommand)]
enum Sub {
    /// Serve `{}` to every request on a free loopback port (used by the bench itself).
    NullServer,
}

#[derive(Args)]
struct Opts {
    /// Benchmark the server at this base URL (as given to the bridge) instead of starting
    /// callbackd.
    #[arg(long, requires = "token")]
    url: Option<String>,
    /// The store bearer token of the server at --url.
    #[arg(long)]
    token: Option<String>,
    /// Process id of the server at --url, for its CPU and memory figures.
    #[arg(long, requires = "url")]
    pid: Option<u32>,
    /// The callbackd binary to start.
    #[arg(long, default_value = "target/release/callbackd")]
    bin: PathBuf,
    /// Directory for the started daemon's scratch database (default: the system temp dir).
    #[arg(long)]
    db_dir: Option<PathBuf>,
    /// Run the started daemon on PostgreSQL at this URL (a fresh schema `bench_<tag>`)
    /// instead of a scratch SQLite file.
    #[arg(long, value_name = "URL")]
    pg_url: Option<String>,
    /// With --pg-url: start this many daemons on the one schema; clients are spread over
    /// them round-robin and the CPU figures add theirs up.
    #[arg(long, default_value_t = 1, requires = "pg_url")]
    daemons: usize,
    /// `store.sync` of the started daemon.
    #[arg(long, value_enum, default_value_t = SyncMode::Normal)]
    sync: SyncMode,
    /// Workloads to run, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Workload::Append, Workload::Turn, Workload::Replay, Workload::AgentsList])]
    workloads: Vec<Workload>,
    /// CI-sized runs: a smoke test of every workload and check, not a measurement.
    #[arg(long)]
    quick: bool,
    /// Skip the null server (no ratios).
    #[arg(long)]
    no_null: bool,
    /// Runs of each phase (each against callbackd, then the null server); the row shown is
    /// the run with the median ratio, with the spread of the ratios (default 3, --quick 1).
    #[arg(long)]
    repeat: Option<usize>,
    /// Threads of the load generator (1: a current-thread runtime, cheapest per call).
    #[arg(long, default_value_t = 1)]
    client_threads: usize,
    /// append: runs per phase.
    #[arg(long)]
    runs: Option<usize>,
    /// append: events per run.
    #[arg(long)]
    events: Option<usize>,
    /// append: runs that end, as the telemetry workload appends them (each run's document
    /// created before the phase, its last event `status FINISHED`, run ids scattered), so a
    /// daemon started by hand with `[telemetry]` (--url) exports every run's spans: how the
    /// telemetry cost is counted under callgrind (BENCHMARKS.md, "Telemetry").
    #[arg(long)]
    append_finish: bool,
    /// append: client counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 16, 64])]
    append_clients: Vec<usize>,
    /// turn: turns per client (at 1 and 8 clients).
    #[arg(long)]
    turns_per_client: Option<usize>,
    /// replay: events in the run, and passes over it.
    #[arg(long)]
    replay_events: Option<usize>,
    #[arg(long)]
    replay_passes: Option<usize>,
    /// replay: size range of each event's payload JSON, in bytes (append's by default).
    #[arg(long, value_parser = parse_range, default_value = "500-3000")]
    replay_event_bytes: (usize, usize),
    /// stream: follower counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 100, 1000])]
    stream_followers: Vec<usize>,
    /// stream: events appended to each live run.
    #[arg(long)]
    stream_events: Option<usize>,
    /// burst: followers of the run, and events appended back to back (default 100, 2000;
    /// --quick 10, 100).
    #[arg(long)]
    burst_followers: Option<usize>,
    #[arg(long)]
    burst_events: Option<usize>,
    /// burst: the size range of each event's payload, in bytes.
    #[arg(long, value_parser = parse_range, default_value = "200-2000")]
    burst_event_bytes: (usize, usize),
    /// burst: a second callbackd binary (an older build) whose daemons alternate with
    /// --bin's, round by round, in the same run.
    #[arg(long)]
    burst_old_bin: Option<PathBuf>,
    /// capacity: followers per bridge, comma-separated; a sweep of N bridges for each.
    #[arg(long, value_delimiter = ',', default_values_t = [0, 2])]
    capacity_followers: Vec<usize>,
    /// capacity: the wait between two streamed events of a turn, ms (uniform in LO-HI).
    #[arg(long, value_parser = parse_range, default_value = "15-35")]
    capacity_gap_ms: (usize, usize),
    /// capacity: a bridge's pause between turns, ms (uniform in LO-HI).
    #[arg(long, value_parser = parse_range, default_value = "2000-8000")]
    capacity_think_ms: (usize, usize),
    /// capacity: seconds a step starts turns (each bridge then finishes its turn).
    #[arg(long, default_value_t = 6)]
    capacity_step_s: u64,
    /// capacity: the sweep stops at this many bridges.
    #[arg(long, default_value_t = 1024)]
    capacity_max_bridges: usize,
    /// burst: followers of the baseline burst that the RSS per stream is measured against
    /// (1: the run's shared feed, which exists once anybody follows, is in both).
    #[arg(long, default_value_t = 1)]
    burst_baseline_followers: usize,
    /// namespaces: `[[namespaces]]` in the config of the second daemon.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    namespaces: u64,
    /// namespaces: how many of them the spread phase appends to (run r in namespace r % K;
    /// at most one run each); default: all.
    #[arg(long)]
    ns_spread: Option<usize>,
    /// namespaces: run ids `run-{tag}-{phase}-{r}` (a phase's runs side by side in the
    /// store's indexes) instead of ones with a random prefix, which scatter as the bridge's
    /// random run ids do.
    #[arg(long)]
    ns_clustered_ids: bool,
    /// namespaces: give each of the N namespaces quotas (max_agents, max_stored_bytes,
    /// max_events_per_run, max_appends_per_second), set too high to be reached.
    #[arg(long)]
    ns_quotas: bool,
    /// agents-list: agents in the workspace, and passes over them.
    #[arg(long)]
    agents: Option<usize>,
    #[arg(long)]
    list_passes: Option<usize>,
    /// growth: the store sizes (events) to fill to and measure at, cumulatively
    /// (default 10000,1000000,10000000; --quick 2000,5000).
    #[arg(long, value_delimiter = ',')]
    growth_sizes: Option<Vec<u64>>,
    /// growth: time `callbackd backup` (SQLite) only up to this many events.
    #[arg(long, default_value_t = u64::MAX)]
    growth_backup_max: u64,
    /// growth on PostgreSQL: keep the filled schema afterwards (to EXPLAIN queries on it;
    /// drop it by hand). A SQLite store goes with its scratch directory regardless; the
    /// schema of the other workloads is dropped at the end.
    #[arg(long)]
    growth_keep: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Workload {
    Append,
    Turn,
    Replay,
    AgentsList,
    /// Run API followers (SSE) of live runs; not in the default set.
    Stream,
    /// 100 followers of one run during a back-to-back burst of 2,000 appends, a fresh
    /// daemon per round, alternated with --burst-old-bin (issue 39); not in the default set.
    Burst,
    /// N simulated bridges playing paced turns, M followers each: the largest N whose
    /// store-call p99 stays ≤ 5 ms with nothing lost (issue 39); not in the default set.
    Capacity,
    /// append with N `[[namespaces]]` configured against one namespace, two daemons of its
    /// own (issue 12); not in the default set.
    Namespaces,
    /// append with `[telemetry]` exporting traces to a null OTLP sink against append without
    /// it, two daemons of its own, every run ending (issue 23); not in the default set.
    Telemetry,
    /// One daemon whose store is filled to 10k, 1M and 10M events (straight into its
    /// tables), measured at each size (issue 26); not in the default set.
    Growth,
    /// The store alone: append's and replay's store work done by the bench straight on the
    /// daemon's database (the daemon's statements, no HTTP), against the null server: the
    /// ceiling the store sets on this machine (issue 26); not in the default set.
    Floor,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum, Debug)]
enum SyncMode {
    Normal,
    Full,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Sub::NullServer) => null_server::run(),
        None => bench(&cli.opts),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("callbackd-bench: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn bench(opts: &Opts) -> anyhow::Result<()> {
    let runtime = if opts.client_threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(opts.client_threads)
            .enable_all()
            .build()?
    };
    let report = runtime.block_on(run(opts))?;
    report.print();
    anyhow::ensure!(
        report.failures() == 0,
        "{} phases had errors or wrong answers",
        report.failures()
    );
    Ok(())
}

struct Sizes {
    runs: usize,
    events: usize,
    turns_per_client: usize,
    replay_events: usize,
    replay_passes: usize,
    agents: usize,
    list_passes: usize,
}

impl Sizes {
    fn of(o: &Opts) -> Sizes {
        let q = o.quick;
        Sizes {
            runs: o.runs.unwrap_or(if q { 10 } else { 100 }),
            events: o.events.unwrap_or(if q { 20 } else { 100 }),
            turns_per_client: o.turns_per_client.unwrap_or(if q { 1 } else { 10 }),
            replay_events: o.replay_events.unwrap_or(if q { 1000 } else { 10_000 }),
            replay_passes: o.replay_passes.unwrap_or(if q { 1 } else { 5 }),
            agents: o.agents.unwrap_or(if q { 500 } else { 10_000 }),
            list_passes: o.list_passes.unwrap_or(if q { 1 } else { 5 }),
        }
    }
}

async fn run(opts: &Opts) -> anyhow::Result<Report> {
    let sizes = Sizes::of(opts);
    let tag = format!("{:x}", now_ms() % 0xff_ffff_ffff);
    let mut report = Report::new(opts.quick);
    // A growth run's filled store, removed at the end (a PostgreSQL schema; SQLite's file
    // goes with the scratch directory).
    let mut grown: Option<workloads::growth_fill::Store> = None;
    let null = if opts.no_null {
        None
    } else {
        Some(target::spawn_null()?)
    };

    // The server under test.
    // The scratch directory and the config file of a started daemon.
    let mut scratch: Option<(ScratchDir, PathBuf)> = None;
    let token = format!("bench-{tag}");
    let mut server = if let Some(url) = &opts.url {
        report.server = format!("{url} (pid {:?})", opts.pid);
        Target::external(url, opts.token.as_deref().unwrap_or_default(), opts.pid)?
    } else {
        let dir = ScratchDir::new(opts.db_dir.as_deref())?;
        let db = dir.0.join("callbackd.db");
        let config_path = dir.0.join("callbackd.toml");
        let sync = match opts.sync {
            SyncMode::Normal => "normal",
            SyncMode::Full => "full",
        };
        let mut config = format!("[store]\nsync = \"{sync}\"\n");
        let db = match &opts.pg_url {
            Some(url) => {
                config.push_str(&format!("schema = \"bench_{tag}\"\n"));
                PathBuf::from(url)
            }
            None => db,
        };
        if opts.workloads.contains(&Workload::Capacity) {
            // What the capacity sweep measures is the daemon's speed, not its default
            // limits (512 connections, 1,024 streams), which the larger steps would pass.
            config.push_str(&format!(
                "[server]\nmax_connections = {c}\n[api]\nmax_streams = {c}\n",
                c = 8192
            ));
        }
        std::fs::write(&config_path, config)?;
        let spawn = Spawn {
            bin: &opts.bin,
            db: &db,
            config: Some(&config_path),
            token: &token,
        };
        let (mut server, ready) = target::spawn_callbackd(&spawn)?;
        for _ in 1..opts.daemons.max(1) {
            server.peers.push(target::spawn_callbackd(&spawn)?.0);
        }
        report.ready_fresh = Some(ready);
        report.server = match &opts.pg_url {
            Some(_) => format!(
                "{} serve × {} on PostgreSQL (schema bench_{tag})",
                opts.bin.display(),
                opts.daemons.max(1)
            ),
            None => format!("{} serve (store.sync = {sync})", opts.bin.display()),
        };
        tokio::time::sleep(Duration::from_millis(500)).await;
        report.idle_rss_start = server.pid.and_then(rss_kib).map(|r| r.0);
        scratch = Some((dir, config_path));
        server
    };

    let payloads = Arc::new(gen::Payloads::new(1, 256, (500, 3000)));
    let base_ms = now_ms();
    let reps = opts.repeat.unwrap_or(if opts.quick { 1 } else { 3 }).max(1);
    report.reps = reps;
    for w in &opts.workloads {
        match w {
            Workload::Append => {
                let a = Arc::new(append::Append {
                    tag: tag.clone(),
                    runs: sizes.runs,
                    events: sizes.events,
                    payloads: payloads.clone(),
                    auth: Vec::new(),
                    scatter: opts.append_finish,
                    finish: opts.append_finish,
                });
                for &c in &opts.append_clients {
                    let mut pairs = Vec::new();
                    for rep in 0..reps {
                        let label = format!("a{c}r{rep}");
                        let real = append::run(&server, &a, &label, c, true).await?;
                        let null = match &null {
                            Some(n) => Some(append::run(n, &a, &label, c, false).await?),
                            None => None,
                        };
                        pairs.push((real, null));
                    }
                    report.add(
                        Row::median("append", c, pairs)
                            .note(format!("{} runs × {} events", sizes.runs, sizes.events)),
                    );
                }
            }
            Workload::Turn => {
                let t = Arc::new(turn::Turns {
                    tag: tag.clone(),
                    payloads: payloads.clone(),
                    blobs: Arc::new(gen::blobs(2, 32)),
                    base_ms,
                });
                for c in [1, 8] {
                    let turns = c * sizes.turns_per_client;
                    let mut pairs = Vec::new();
                    for rep in 0..reps {
                        let label = format!("t{c}r{rep}");
                        let real = turn::run(&server, &t, &label, c, turns, true).await?;
                        let null = match &null {
                            Some(n) => Some(turn::run(n, &t, &label, c, turns, false).await?),
                            None => None,
                        };
                        pairs.push((real, null));
                    }
                    report.add(
                        Row::median("turn", c, pairs)
                            .note(format!("{turns} turns × {} calls", turn::CALLS_PER_TURN)),
                    );
                }
            }
            Workload::Replay => {
                let a = Arc::new(append::Append {
                    tag: tag.clone(),
                    runs: 1,
                    events: sizes.replay_events,
                    payloads: Arc::new(gen::Payloads::new(1, 256, opts.replay_event_bytes)),
                    auth: Vec::new(),
                    scatter: false,
                    finish: false,
                });
                let (run_id, setup) = replay::setup(&server, &a, true).await?;
                report.setup("replay setup (append, 16 clients)", &setup);
                let n = sizes.replay_events as u64;
                let passes = sizes.replay_passes;
                let mut pairs = Vec::new();
                for _ in 0..reps {
                    let real = replay::run(&server, &run_id, n, passes, true).await?;
                    let null = match &null {
                        Some(nl) => Some(replay::run(nl, &run_id, n, passes, false).await?),
                        None => None,
                    };
                    pairs.push((real, null));
                }
                let (lo, hi) = opts.replay_event_bytes;
                report.add(Row::median("replay", 1, pairs).note(format!(
                    "{n} events of {lo}–{hi} bytes, pages of {}, {passes} passes",
                    replay::PAGE
                )));
            }
            Workload::Stream => {
                let Some(pid) = server.pid else {
                    anyhow::bail!("the stream workload needs a started callbackd (not --url)");
                };
                let api = target::api_token(&token);
                let events = opts
                    .stream_events
                    .unwrap_or(if opts.quick { 50 } else { 500 });
                let followers: Vec<usize> = if opts.quick {
                    vec![1, 10]
                } else {
                    opts.stream_followers.clone()
                };
                for (i, &n) in followers.iter().enumerate() {
                    let runs = n.clamp(1, 10);
                    let f = workloads::stream::run(
                        &server,
                        &api,
                        &format!("{tag}-s{i}"),
                        n,
                        runs,
                        events,
                    )
                    .await?;
                    report.stream(&f);
                }
                let idle = if opts.quick { 20 } else { 1000 };
                let per = workloads::stream::idle_rss(&server, &api, &tag, idle).await?;
                report.stream_idle(idle, per, pid);
            }
            Workload::Burst => {
                anyhow::ensure!(
                    opts.url.is_none() && opts.pg_url.is_none(),
                    "the burst workload starts SQLite daemons of its own (not with --url or --pg-url)"
                );
                let followers = opts
                    .burst_followers
                    .unwrap_or(if opts.quick { 10 } else { 100 });
                let events = opts
                    .burst_events
                    .unwrap_or(if opts.quick { 100 } else { 2000 });
                let mut bins = Vec::new();
                if let Some(old) = &opts.burst_old_bin {
                    bins.push(old.as_path());
                }
                bins.push(opts.bin.as_path());
                let mut rows = Vec::new();
                for rep in 0..reps {
                    for (b, bin) in bins.iter().enumerate() {
                        let tag = format!("{tag}b{rep}{b}");
                        let setup = workloads::namespaces::Setup {
                            bin,
                            db_dir: opts.db_dir.as_deref(),
                            sync: match opts.sync {
                                SyncMode::Normal => "normal",
                                SyncMode::Full => "full",
                            },
                            pg_url: None,
                            tag: &tag,
                            namespaces: 0,
                            quotas: false,
                        };
                        let alone = workloads::burst::run(
                            &setup,
                            opts.burst_baseline_followers,
                            events,
                            opts.burst_event_bytes,
                        )
                        .await?;
                        let tag = format!("{tag}f");
                        let setup = workloads::namespaces::Setup { tag: &tag, ..setup };
                        let f = workloads::burst::run(
                            &setup,
                            followers,
                            events,
                            opts.burst_event_bytes,
                        )
                        .await?;
                        anyhow::ensure!(
                            f.wrong == 0,
                            "burst: {} of {followers} followers of {} did not get every seq exactly once",
                            f.wrong,
                            bin.display()
                        );
                        rows.push((f, alone));
                    }
                }
                workloads::burst::print(&rows);
            }
            Workload::Capacity => {
                anyhow::ensure!(
                    server.pid.is_some() && opts.daemons <= 1,
                    "the capacity workload needs one started callbackd (not --url or --daemons)"
                );
                let c = Arc::new(workloads::capacity::Capacity {
                    turns: Arc::new(turn::Turns {
                        tag: tag.clone(),
                        payloads: payloads.clone(),
                        blobs: Arc::new(gen::blobs(2, 32)),
                        base_ms,
                    }),
                    api_token: target::api_token(&token),
                    gap_ms: opts.capacity_gap_ms,
                    think_ms: opts.capacity_think_ms,
                    step: Duration::from_secs(if opts.quick { 2 } else { opts.capacity_step_s }),
                    max_bridges: if opts.quick {
                        2
                    } else {
                        opts.capacity_max_bridges
                    },
                });
                let steps = workloads::capacity::sweep(
                    &server,
                    null.as_ref(),
                    &c,
                    &tag,
                    &opts.capacity_followers,
                )
                .await?;
                let backend = if opts.pg_url.is_some() {
                    "PostgreSQL"
                } else {
                    "SQLite"
                };
                workloads::capacity::print(backend, &c, &steps);
            }
            Workload::Telemetry => {
                anyhow::ensure!(
                    opts.url.is_none() && opts.daemons <= 1,
                    "the telemetry workload starts daemons of its own (not with --url or --daemons)"
                );
                // The null server is the null OTLP sink (one of its own with --no-null).
                let own_sink = match &null {
                    Some(_) => None,
                    None => Some(target::spawn_null()?),
                };
                let sink = null.as_ref().or(own_sink.as_ref()).expect("one of them");
                let setup = workloads::namespaces::Setup {
                    bin: &opts.bin,
                    db_dir: opts.db_dir.as_deref(),
                    sync: match opts.sync {
                        SyncMode::Normal => "normal",
                        SyncMode::Full => "full",
                    },
                    pg_url: opts.pg_url.as_deref(),
                    tag: &tag,
                    namespaces: 0,
                    quotas: false,
                };
                let a = append::Append {
                    tag: tag.clone(),
                    runs: sizes.runs,
                    events: sizes.events,
                    payloads: payloads.clone(),
                    auth: Vec::new(),
                    scatter: true,
                    finish: true,
                };
                workloads::telemetry::run(&setup, sink, &a, &opts.append_clients, reps).await?;
            }
            Workload::Namespaces => {
                anyhow::ensure!(
                    opts.url.is_none() && opts.daemons <= 1,
                    "the namespaces workload starts daemons of its own (not with --url or --daemons)"
                );
                let count = usize::try_from(opts.namespaces)?;
                let d = workloads::namespaces::start(&workloads::namespaces::Setup {
                    bin: &opts.bin,
                    db_dir: opts.db_dir.as_deref(),
                    sync: match opts.sync {
                        SyncMode::Normal => "normal",
                        SyncMode::Full => "full",
                    },
                    pg_url: opts.pg_url.as_deref(),
                    tag: &tag,
                    namespaces: count,
                    quotas: opts.ns_quotas,
                })
                .await?;
                let a = append::Append {
                    tag: tag.clone(),
                    runs: sizes.runs,
                    events: sizes.events,
                    payloads: payloads.clone(),
                    auth: Vec::new(),
                    scatter: !opts.ns_clustered_ids,
                    finish: false,
                };
                let spread = opts.ns_spread.unwrap_or(count);
                let rows =
                    workloads::namespaces::run(&d, &a, &opts.append_clients, spread, reps).await?;
                report.namespaces(report::Namespaces {
                    count,
                    quotas: opts.ns_quotas,
                    rows,
                    ready_one: d.ready_one,
                    ready_many: d.ready_many,
                    idle_rss_one: d.idle_rss_one,
                    idle_rss_many: d.idle_rss_many,
                });
            }
            Workload::Growth => {
                let Some((dir, config_path)) = &scratch else {
                    anyhow::bail!("the growth workload needs a started callbackd (not --url)");
                };
                anyhow::ensure!(
                    opts.daemons <= 1,
                    "the growth workload stops and starts its one daemon (not with --daemons)"
                );
                let (db, store) = started_store(opts, dir, &tag);
                let sizes = opts.growth_sizes.clone().unwrap_or_else(|| {
                    if opts.quick {
                        vec![2000, 5000]
                    } else {
                        vec![10_000, 1_000_000, 10_000_000]
                    }
                });
                let g = workloads::growth::Growth {
                    bin: &opts.bin,
                    db: &db,
                    config: config_path,
                    token: &token,
                    store,
                    tag: &tag,
                    sizes,
                    backup_max: opts.growth_backup_max,
                    passes: if opts.quick { 1 } else { 20 },
                    reps,
                    append_runs: if opts.quick {
                        [(1, 5), (16, 10)]
                    } else {
                        [(1, 20), (16, 40)]
                    },
                    scratch: &dir.0,
                };
                let (s, rows) = workloads::growth::run(server, &g).await?;
                server = s;
                report.growth(
                    rows,
                    if opts.pg_url.is_some() {
                        "PostgreSQL"
                    } else {
                        "SQLite"
                    },
                );
                grown = Some(g.store);
            }
            Workload::Floor => {
                let Some((dir, _)) = &scratch else {
                    anyhow::bail!("the floor workload needs a started callbackd (not --url)");
                };
                let (db, store) = started_store(opts, dir, &tag);
                if opts.pg_url.is_none() {
                    let a = Arc::new(append::Append {
                        tag: tag.clone(),
                        runs: sizes.runs,
                        events: sizes.events,
                        payloads: payloads.clone(),
                        auth: Vec::new(),
                        scatter: false,
                        finish: false,
                    });
                    let sync = match opts.sync {
                        SyncMode::Normal => "normal",
                        SyncMode::Full => "full",
                    };
                    for &c in &opts.append_clients {
                        let mut pairs = Vec::new();
                        for rep in 0..reps {
                            let label = format!("{tag}-f{c}r{rep}");
                            let floor = workloads::floor::append(&workloads::floor::Appends {
                                db: &db,
                                sync,
                                label: &label,
                                runs: sizes.runs,
                                events: sizes.events,
                                group: c,
                                payloads: &payloads,
                            })?;
                            let null = match &null {
                                Some(n) => Some(append::run(n, &a, &label, c, false).await?),
                                None => None,
                            };
                            pairs.push((floor, null));
                        }
                        report.add(Row::median("floor append", c, pairs).note(format!(
                            "{} runs × {} events, {c} per transaction; null: append ×{c}",
                            sizes.runs, sizes.events
                        )));
                    }
                }
                let replay_payloads = gen::Payloads::new(1, 256, opts.replay_event_bytes);
                let n = sizes.replay_events;
                let run = workloads::floor::replay_setup(
                    &store,
                    &format!("{tag}-floor"),
                    n,
                    &replay_payloads,
                )
                .await?;
                let mut pairs = Vec::new();
                for _ in 0..reps {
                    let m = workloads::floor::replay(&store, &run, n, sizes.replay_passes).await?;
                    pairs.push((m, None));
                }
                report.add(Row::median("floor replay", 1, pairs).note(format!(
                    "{n} events, pages of 100, {} passes",
                    sizes.replay_passes
                )));
            }
            Workload::AgentsList => {
                let setup = agents_list::setup(&server, &tag, sizes.agents, base_ms).await?;
                report.setup("agents-list setup (agents.create, 16 clients)", &setup);
                let (n, passes) = (sizes.agents, sizes.list_passes);
                let mut pairs = Vec::new();
                for _ in 0..reps {
                    let (real, cursors) =
                        agents_list::run(&server, &tag, n, passes, None, true).await?;
                    let null = match &null {
                        Some(nl) => Some(
                            agents_list::run(nl, &tag, n, passes, Some(cursors), false)
                                .await?
                                .0,
                        ),
                        None => None,
                    };
                    pairs.push((real, null));
                }
                report.add(
                    Row::median("agents-list", 1, pairs)
                        .note(format!("{n} agents, pages of 50, {passes} passes")),
                );
            }
        }
    }

    if let Some(pid) = server.pid {
        tokio::time::sleep(Duration::from_secs(2)).await;
        report.idle_rss_end = rss_kib(pid).map(|r| r.0);
    }
    // A restart on the now populated database.
    if let Some((dir, config_path)) = &scratch {
        let db = match &opts.pg_url {
            Some(url) => PathBuf::from(url),
            None => dir.0.join("callbackd.db"),
        };
        drop(server);
        let spawn = Spawn {
            bin: &opts.bin,
            db: &db,
            config: Some(config_path),
            token: &token,
        };
        let (restarted, ready) = target::spawn_callbackd(&spawn).context("restarting callbackd")?;
        report.ready_populated = Some(ready);
        server = restarted;
    }
    drop(server);
    match (&grown, &opts.pg_url) {
        (Some(_), _) if opts.growth_keep => {
            eprintln!("growth: the filled schema bench_{tag} is kept (--growth-keep)");
        }
        (Some(store), _) => workloads::growth::cleanup(store).await?,
        // Every workload's rows go with the schema: left behind, dozens of them make the
        // server's autovacuum visit them during later runs (BENCHMARKS.md, "Appends grouped").
        (None, Some(url)) if opts.url.is_none() => {
            workloads::growth_fill::pg_drop(url, &format!("bench_{tag}"))
                .await
                .with_context(|| format!("dropping schema bench_{tag}"))?;
        }
        (None, _) => {}
    }
    Ok(report)
}

/// The started daemon's store: its `--db` argument, and where the bench reaches its tables.
fn started_store(
    opts: &Opts,
    dir: &ScratchDir,
    tag: &str,
) -> (PathBuf, workloads::growth_fill::Store) {
    let db = match &opts.pg_url {
        Some(url) => PathBuf::from(url),
        None => dir.0.join("callbackd.db"),
    };
    let store =
        workloads::growth::store_of(&db, opts.pg_url.as_ref().map(|_| format!("bench_{tag}")));
    (db, store)
}

/// `LO-HI`, two sizes in bytes.
fn parse_range(s: &str) -> Result<(usize, usize), String> {
    let (lo, hi) = s.split_once('-').ok_or("expected LO-HI, e.g. 500-3000")?;
    let lo: usize = lo.trim().parse().map_err(|e| format!("{lo}: {e}"))?;
    let hi: usize = hi.trim().parse().map_err(|e| format!("{hi}: {e}"))?;
    if lo == 0 || lo > hi {
        return Err("expected 0 < LO <= HI".into());
    }
    Ok((lo, hi))
}

/// For `report`: a phase that is not a row of the table.
pub fn setup_line(what: &str, m: &Measured) -> String {
    format!(
        "{what}: {} calls in {:.2} s ({:.0}/s), {} errors, {} wrong",
        m.calls,
        m.wall.as_secs_f64(),
        m.rate(),
        m.errors,
        m.wrong
    )
}
