//! The `growth` workload's filler: agents, runs and their events written straight into the
//! daemon's own tables (SQLite with rusqlite while the daemon is stopped, PostgreSQL with
//! `COPY` into its schema), millions of events in minutes where the HTTP append path would
//! take an hour. What it writes is what the daemon itself would have written for a finished
//! run of the bridge: the agent and run documents the bridge sends (gen::AgentState,
//! gen::RunState), events numbered 1..n with the bridge's envelope, and on PostgreSQL the
//! run's `run_seqs` counter; so a filled run replays, lists and counts exactly like one
//! appended through the daemon (the workload checks that it does).
//!
//! Both backends get the same rows from the same generator ([`Layout`]); the payload sizes
//! are those of the bridge's real traffic ([`Mix`], BENCHMARKS.md "Growth").

use std::path::{Path, PathBuf};

use anyhow::Context;
use futures_util::SinkExt;

use crate::gen::{text, AgentState, Rng, RunState};

/// The namespace of a daemon without `[[namespaces]]`.
pub const NS: &str = "default";

/// Events of each filled run.
pub const EVENTS_PER_RUN: u64 = 100;
/// Runs of each filled agent (its turns).
const RUNS_PER_AGENT: u64 = 4;
/// Workspaces (`cwd`) the filled agents are spread over.
const WORKSPACES: u64 = 50;
/// Time between two filled runs' starts, and between two events of a run: 10M events
/// (100k runs) span ~90 days before now.
const RUN_SPACING_MS: u64 = 78_000;
const EVENT_SPACING_MS: u64 = 250;

/// Where the started daemon keeps its store.
pub enum Store {
    Sqlite(PathBuf),
    Postgres { url: String, schema: String },
}

/// One middle-of-run event kind of the bridge's traffic: its share of the events and the
/// sizes of its variable text (the model's words, a tool's arguments or result) as
/// quantiles p0, p50, p90, p100 in bytes, sampled piecewise linearly (p0–p50 half the time,
/// p50–p90 four tenths, p90–p100 a tenth).
struct Kind {
    name: &'static str,
    weight: u32,
    text: [usize; 4],
}

/// The middle of a run (between `request`, `status RUNNING` and `usage`, `status
/// FINISHED`): the event kinds of real bridge turns with their exact JSON shapes (see
/// [`Mix::new`]); the text sizes are assumptions (BENCHMARKS.md "Growth": the fake
/// backend's model writes 20–120 bytes where a real one writes more).
const MIX: [Kind; 5] = [
    Kind {
        name: "assistant",
        weight: 30,
        text: [20, 200, 1200, 6000],
    },
    Kind {
        name: "thinking",
        weight: 10,
        text: [20, 300, 1500, 6000],
    },
    Kind {
        name: "thinking_done",
        weight: 10,
        text: [0, 0, 0, 0],
    },
    Kind {
        name: "tool_running",
        weight: 25,
        text: [40, 150, 600, 4000],
    },
    Kind {
        name: "tool_completed",
        weight: 25,
        text: [20, 400, 4000, 16000],
    },
];

fn sample(rng: &mut Rng, q: &[usize; 4]) -> usize {
    let u = (rng.next() % 1000) as usize;
    let (lo, hi, f) = if u < 500 {
        (q[0], q[1], u as f64 / 500.0)
    } else if u < 900 {
        (q[1], q[2], (u - 500) as f64 / 400.0)
    } else {
        (q[2], q[3], (u - 900) as f64 / 100.0)
    };
    lo + ((hi - lo) as f64 * f) as usize
}

/// A pool of middle-of-run messages, drawn once. Each is `(type, rest)`: the message is
/// `{"type":"<type>","agent_id":"<agent>","run_id":"<run>",<rest>`, as the bridge writes it.
pub struct Mix {
    messages: Vec<(&'static str, String)>,
}

impl Mix {
    pub fn new(seed: u64, n: usize) -> Mix {
        let mut rng = Rng::new(seed);
        let total: u32 = MIX.iter().map(|k| k.weight).sum();
        let messages = (0..n)
            .map(|i| {
                let mut w = (rng.next() % u64::from(total)) as u32;
                let kind = MIX
                    .iter()
                    .find(|k| {
                        let hit = w < k.weight;
                        w = w.saturating_sub(k.weight);
                        hit
                    })
                    .expect("weights add up");
                let len = sample(&mut rng, &kind.text);
                let body = text(&mut rng, len);
                let args = r#"{"providerIdentifier":"custom-user-tools","toolName":"read_file","args":{"#;
                match kind.name {
                    "assistant" => ("assistant", format!(
                        r#""message":{{"role":"assistant","content":[{{"type":"text","text":"{body}"}}]}}}}"#
                    )),
                    "thinking" => ("thinking", format!(r#""text":"{body}"}}"#)),
                    "thinking_done" => (
                        "thinking",
                        format!(r#""text":"","thinking_duration_ms":{}}}"#, 5 + i % 4000),
                    ),
                    "tool_running" => ("tool_call", format!(
                        r#""call_id":"toolu_{i:024x}","name":"mcp","status":"running","args":{args}"path":"{body}"}}}}}}"#
                    )),
                    _ => ("tool_call", format!(
                        r#""call_id":"toolu_{i:024x}","name":"mcp","status":"completed","args":{args}"path":"src/main.rs"}}}},"result":{{"status":"success","value":{{"content":[{{"text":{{"text":"{body}"}}}}],"isError":false}}}}}}"#
                    )),
                }
            })
            .collect();
        Mix { messages }
    }
}

/// The store's shape: run `r` (0-based, in the order filled) belongs to agent `r / 4` in
/// workspace `agent % 50`, started `RUN_SPACING_MS` after run `r - 1`, the newest filled run
/// `RUN_SPACING_MS` before now at the largest size.
pub struct Layout {
    pub tag: String,
    /// From the tag: ids of two bench runs never collide.
    seed: u64,
    t0_ms: u64,
    mix: Mix,
}

/// What one filled run is.
struct Run {
    agent: String,
    run: String,
    request: String,
    created: u64,
    events: u64,
    error: bool,
}

impl Layout {
    /// `max_runs`: the filled runs at the largest size (so the newest is just before now).
    pub fn new(tag: &str, max_runs: u64, now_ms: u64) -> Layout {
        Layout {
            tag: tag.to_string(),
            seed: u64::from_str_radix(tag, 16)
                .unwrap_or(0)
                .wrapping_mul(0x9E37_79B9_7F4A_7C15),
            t0_ms: now_ms.saturating_sub((max_runs + 1) * RUN_SPACING_MS),
            mix: Mix::new(7, 4096),
        }
    }

    /// A UUID, as the bridge names agents; unique per bench run (the tag) and agent.
    pub fn agent_id(&self, a: u64) -> String {
        uuid(self.seed ^ Rng::new(a + 1).next(), a)
    }

    /// The agent of filled run `r`.
    pub fn agent_of(&self, r: u64) -> String {
        self.agent_id(r / RUNS_PER_AGENT)
    }

    /// `run-<UUID>`, as the bridge names runs (scattered over the indexes as its random ids
    /// are).
    pub fn run_id(&self, r: u64) -> String {
        format!(
            "run-{}",
            uuid(self.seed ^ Rng::new(r + 0x1_0000_0000).next(), r)
        )
    }

    pub fn cwd(&self, a: u64) -> String {
        format!("/growth/{}/ws{:02}", self.tag, a % WORKSPACES)
    }

    fn run(&self, r: u64, events: u64) -> Run {
        Run {
            agent: self.agent_id(r / RUNS_PER_AGENT),
            run: self.run_id(r),
            request: uuid(Rng::new(r ^ 0x5eed).next(), r),
            created: self.t0_ms + r * RUN_SPACING_MS,
            events,
            // One run in 20 ends in an error.
            error: r % 20 == 7,
        }
    }

    fn agent_doc(&self, a: u64, last_run: u64) -> (String, f64) {
        let created = self.t0_ms + a * RUNS_PER_AGENT * RUN_SPACING_MS;
        let updated = self.t0_ms + last_run * RUN_SPACING_MS + EVENTS_PER_RUN * EVENT_SPACING_MS;
        let id = self.agent_id(a);
        let cwd = self.cwd(a);
        let doc = AgentState {
            agent_id: &id,
            cwd: &cwd,
            status: "idle",
            active_run: None,
            latest_root: None,
            created_at: created,
            updated_at: updated,
        }
        .doc();
        (doc, updated as f64)
    }

    fn run_doc(&self, run: &Run, turn: u64) -> String {
        let ended = run.created + run.events * EVENT_SPACING_MS;
        let mut doc = RunState {
            agent_id: &run.agent,
            run_id: &run.run,
            status: if run.error { "error" } else { "finished" },
            request_id: Some(&run.request),
            result: (!run.error).then_some("Done."),
            latest_root: None,
            created_at: run.created,
            updated_at: ended,
            started_at: Some(run.created),
            ended_at: Some(ended),
        }
        .doc();
        // gen::RunState writes turnNumber 1; a filled agent's runs are its turns 1..4.
        doc = doc.replacen(r#""turnNumber":1,"#, &format!(r#""turnNumber":{turn},"#), 1);
        doc
    }

    /// Event `seq` (1-based) of `run`: the envelope the bridge writes around each message,
    /// the message naming its agent and run again.
    fn payload(&self, run: &Run, r: u64, seq: u64, out: &mut String) {
        let (kind, rest): (&str, &str) = if seq == 1 {
            ("request", "")
        } else if seq == 2 {
            ("status", r#""status":"RUNNING"}"#)
        } else if seq == run.events && run.error {
            (
                "status",
                r#""status":"ERROR","message":"[resource_exhausted] rate limited"}"#,
            )
        } else if seq == run.events {
            ("status", r#""status":"FINISHED"}"#)
        } else if seq == run.events - 1 {
            (
                "usage",
                r#""usage":{"inputTokens":18204,"outputTokens":2311,"cacheReadTokens":12000,"cacheWriteTokens":0,"totalTokens":32515}}"#,
            )
        } else {
            let m = &self.mix.messages;
            let k = (r.wrapping_mul(7919) + seq.wrapping_mul(104_729)) % m.len() as u64;
            let (kind, rest) = &m[k as usize];
            (kind, rest)
        };
        out.clear();
        out.push_str(r#"{"schemaVersion":1,"type":"sdk_message","agentId":""#);
        out.push_str(&run.agent);
        out.push_str(r#"","runId":""#);
        out.push_str(&run.run);
        out.push_str(r#"","message":{"type":""#);
        out.push_str(kind);
        out.push_str(r#"","agent_id":""#);
        out.push_str(&run.agent);
        out.push_str(r#"","run_id":""#);
        out.push_str(&run.run);
        if kind == "request" {
            out.push_str(r#"","request_id":""#);
            out.push_str(&run.request);
            out.push_str(r#""}"#);
        } else {
            out.push_str(r#"","#);
            out.push_str(rest);
        }
        out.push('}');
    }

    fn event_time(run: &Run, seq: u64) -> u64 {
        run.created + seq * EVENT_SPACING_MS
    }
}

/// A UUID-shaped id: 64 pseudo-random bits and the index `n` (so ids of one layout never
/// collide).
fn uuid(h: u64, n: u64) -> String {
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        h >> 32,
        (h >> 16) & 0xffff,
        h & 0xfff,
        (n >> 48) & 0xfff,
        n & 0xffff_ffff_ffff
    )
}

/// Rows handed to a backend: agents (id, cwd, updated_at, doc), runs (agent, run, turn,
/// doc) and each run's events, generated one run at a time.
trait Sink {
    fn agent(&mut self, id: &str, cwd: &str, updated: f64, doc: &str) -> anyhow::Result<()>;
    fn run(&mut self, agent: &str, run: &str, turn: u64, doc: &str) -> anyhow::Result<()>;
    fn event(&mut self, run: &str, seq: u64, payload: &str, created: u64) -> anyhow::Result<()>;
    fn seqs(&mut self, run: &str, last: u64) -> anyhow::Result<()>;
}

/// Generates runs `from..to` of `events` events each (agents as their first run comes).
fn generate(
    l: &Layout,
    from: u64,
    to: u64,
    events: u64,
    sink: &mut dyn Sink,
) -> anyhow::Result<()> {
    let mut payload = String::with_capacity(20_000);
    for r in from..to {
        let run = l.run(r, events);
        let a = r / RUNS_PER_AGENT;
        if r % RUNS_PER_AGENT == 0 || r == from {
            // The agent as it stands after its last run of this fill (re-written with the
            // same id when a later fill adds its later runs: an upsert).
            let last = (a * RUNS_PER_AGENT + RUNS_PER_AGENT - 1).min(to - 1);
            let (doc, updated) = l.agent_doc(a, last);
            sink.agent(&l.agent_id(a), &l.cwd(a), updated, &doc)?;
        }
        sink.run(
            &run.agent,
            &run.run,
            r % RUNS_PER_AGENT + 1,
            &l.run_doc(&run, r % RUNS_PER_AGENT + 1),
        )?;
        for seq in 1..=events {
            l.payload(&run, r, seq, &mut payload);
            sink.event(&run.run, seq, &payload, Layout::event_time(&run, seq))?;
        }
        sink.seqs(&run.run, events)?;
    }
    Ok(())
}

/// Adds filled runs `from..to` (100 events each) to the store.
pub async fn fill(store: &Store, l: &Layout, from: u64, to: u64) -> anyhow::Result<()> {
    match store {
        Store::Sqlite(path) => sqlite_fill(path, l, from, to, EVENTS_PER_RUN),
        Store::Postgres { url, schema } => pg_fill(url, schema, l, from, to, EVENTS_PER_RUN).await,
    }
}

/// Adds one filled run of `events` events (the replay run), with index `r`.
pub async fn fill_one(store: &Store, l: &Layout, r: u64, events: u64) -> anyhow::Result<String> {
    match store {
        Store::Sqlite(path) => sqlite_fill(path, l, r, r + 1, events)?,
        Store::Postgres { url, schema } => pg_fill(url, schema, l, r, r + 1, events).await?,
    }
    Ok(l.run_id(r))
}

// ---- SQLite -------------------------------------------------------------------------------

struct SqliteSink<'c> {
    tx: &'c rusqlite::Transaction<'c>,
}

impl Sink for SqliteSink<'_> {
    fn agent(&mut self, id: &str, cwd: &str, updated: f64, doc: &str) -> anyhow::Result<()> {
        self.tx
            .prepare_cached(
                "INSERT INTO agents (ns, agent_id, cwd, updated_at, doc) VALUES (?1, ?2, ?3, ?4, ?5) \
                 ON CONFLICT (ns, agent_id) DO UPDATE SET updated_at = excluded.updated_at, doc = excluded.doc",
            )?
            .execute(rusqlite::params![NS, id, cwd, updated, doc])?;
        Ok(())
    }
    fn run(&mut self, agent: &str, run: &str, turn: u64, doc: &str) -> anyhow::Result<()> {
        self.tx
            .prepare_cached(
                "INSERT INTO runs (ns, agent_id, run_id, turn_number, doc) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(rusqlite::params![NS, agent, run, turn as f64, doc])?;
        Ok(())
    }
    fn event(&mut self, run: &str, seq: u64, payload: &str, created: u64) -> anyhow::Result<()> {
        self.tx
            .prepare_cached(
                "INSERT INTO run_events (ns, run_id, seq, event_type, payload, payload_ref, idempotency_key, created_at) \
                 VALUES (?1, ?2, ?3, 'run_stream_event', ?4, NULL, NULL, ?5)",
            )?
            .execute(rusqlite::params![NS, run, seq as i64, payload, created as i64])?;
        Ok(())
    }
    fn seqs(&mut self, _run: &str, _last: u64) -> anyhow::Result<()> {
        // SQLite numbers a run's next event max(seq) + 1: no counter.
        Ok(())
    }
}

pub fn sqlite_open(path: &Path) -> anyhow::Result<rusqlite::Connection> {
    let conn =
        rusqlite::Connection::open(path).with_context(|| format!("opening {}", path.display()))?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    Ok(conn)
}

fn sqlite_fill(path: &Path, l: &Layout, from: u64, to: u64, events: u64) -> anyhow::Result<()> {
    let mut conn = sqlite_open(path)?;
    // The daemon is stopped: no durability needed until the final checkpoint.
    conn.execute_batch("PRAGMA synchronous = OFF; PRAGMA cache_size = -262144;")?;
    // Transactions of ~100k events keep the WAL to ~100 MB between checkpoints.
    let step = (100_000 / events).max(1);
    let mut r = from;
    while r < to {
        let end = (r + step).min(to);
        let tx = conn.transaction()?;
        generate(l, r, end, events, &mut SqliteSink { tx: &tx })?;
        tx.commit()?;
        r = end;
    }
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    drop(conn);
    // Written without fsync: flush it now, or the daemon's first checkpoint fsync would wait
    // for gigabytes of the filler's dirty pages and show as a seconds-long append stall.
    std::fs::File::open(path)?.sync_all()?;
    Ok(())
}

/// Rows in `run_events` (all namespaces).
pub async fn count_events(store: &Store) -> anyhow::Result<u64> {
    match store {
        Store::Sqlite(path) => {
            let conn = sqlite_open(path)?;
            let n: i64 = conn.query_row("SELECT count(*) FROM run_events", [], |r| r.get(0))?;
            Ok(n as u64)
        }
        Store::Postgres { url, schema } => {
            let c = pg_connect(url, schema).await?;
            let n: i64 = c
                .query_one("SELECT count(*) FROM run_events", &[])
                .await?
                .get(0);
            Ok(n as u64)
        }
    }
}

/// Bytes the store takes on disk: SQLite the database file and its WAL; PostgreSQL the
/// tables of the schema with their indexes and TOAST (`pg_total_relation_size`).
pub async fn disk_bytes(store: &Store) -> anyhow::Result<u64> {
    match store {
        Store::Sqlite(path) => {
            let mut total = 0;
            for suffix in ["", "-wal"] {
                let mut p = path.clone().into_os_string();
                p.push(suffix);
                total += std::fs::metadata(&p).map_or(0, |m| m.len());
            }
            Ok(total)
        }
        Store::Postgres { url, schema } => {
            let c = pg_connect(url, schema).await?;
            let n: i64 = c
                .query_one(
                    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c \
                     JOIN pg_namespace n ON n.oid = c.relnamespace \
                     WHERE n.nspname = $1 AND c.relkind = 'r'",
                    &[schema],
                )
                .await?
                .get(0);
            Ok(n as u64)
        }
    }
}

// ---- PostgreSQL ---------------------------------------------------------------------------

pub async fn pg_connect(url: &str, schema: &str) -> anyhow::Result<tokio_postgres::Client> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .context("connecting to PostgreSQL")?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
        .batch_execute(&format!(
            "SET search_path TO \"{schema}\"; SET synchronous_commit = off"
        ))
        .await?;
    Ok(client)
}

/// `COPY ... FROM STDIN` text rows: tab-separated, `\N` for NULL, backslashes doubled (JSON
/// text holds no raw tab or newline).
#[derive(Default)]
struct PgSink {
    agents: String,
    runs: String,
    events: String,
    seqs: String,
}

fn esc(out: &mut String, s: &str) {
    if s.contains(['\\', '\t', '\n', '\r']) {
        for ch in s.chars() {
            match ch {
                '\\' => out.push_str("\\\\"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                c => out.push(c),
            }
        }
    } else {
        out.push_str(s);
    }
}

impl Sink for PgSink {
    fn agent(&mut self, id: &str, cwd: &str, updated: f64, doc: &str) -> anyhow::Result<()> {
        let o = &mut self.agents;
        o.push_str(NS);
        o.push('\t');
        esc(o, id);
        o.push('\t');
        esc(o, cwd);
        o.push('\t');
        o.push_str(&updated.to_string());
        o.push('\t');
        esc(o, doc);
        o.push('\n');
        Ok(())
    }
    fn run(&mut self, agent: &str, run: &str, turn: u64, doc: &str) -> anyhow::Result<()> {
        let o = &mut self.runs;
        o.push_str(NS);
        o.push('\t');
        esc(o, agent);
        o.push('\t');
        esc(o, run);
        o.push('\t');
        o.push_str(&turn.to_string());
        o.push('\t');
        esc(o, doc);
        o.push('\n');
        Ok(())
    }
    fn event(&mut self, run: &str, seq: u64, payload: &str, created: u64) -> anyhow::Result<()> {
        let o = &mut self.events;
        o.push_str(NS);
        o.push('\t');
        esc(o, run);
        o.push('\t');
        o.push_str(&seq.to_string());
        o.push_str("\trun_stream_event\t");
        esc(o, payload);
        o.push_str("\t\\N\t\\N\t");
        o.push_str(&created.to_string());
        o.push('\n');
        Ok(())
    }
    fn seqs(&mut self, run: &str, last: u64) -> anyhow::Result<()> {
        let o = &mut self.seqs;
        o.push_str(NS);
        o.push('\t');
        esc(o, run);
        o.push('\t');
        o.push_str(&last.to_string());
        o.push('\n');
        Ok(())
    }
}

async fn copy_in(
    tx: &tokio_postgres::Transaction<'_>,
    sql: &str,
    rows: String,
) -> anyhow::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let sink = tx.copy_in(sql).await?;
    futures_util::pin_mut!(sink);
    sink.send(bytes::Bytes::from(rows)).await?;
    sink.close().await?;
    Ok(())
}

async fn pg_fill(
    url: &str,
    schema: &str,
    l: &Layout,
    from: u64,
    to: u64,
    events: u64,
) -> anyhow::Result<()> {
    let mut client = pg_connect(url, schema).await?;
    let step = (20_000 / events).max(1);
    let mut r = from;
    while r < to {
        let end = (r + step).min(to);
        let mut sink = PgSink::default();
        generate(l, r, end, events, &mut sink)?;
        let tx = client.transaction().await?;
        // Agents are re-written when a later fill adds runs to them: through a staging
        // table, as an upsert.
        tx.batch_execute(
            "CREATE TEMP TABLE IF NOT EXISTS growth_agents (LIKE agents INCLUDING DEFAULTS) ON COMMIT DELETE ROWS",
        )
        .await?;
        copy_in(
            &tx,
            "COPY growth_agents (ns, agent_id, cwd, updated_at, doc) FROM STDIN",
            sink.agents,
        )
        .await?;
        tx.batch_execute(
            "INSERT INTO agents (ns, agent_id, cwd, updated_at, doc) \
             SELECT ns, agent_id, cwd, updated_at, doc FROM growth_agents \
             ON CONFLICT (ns, agent_id) DO UPDATE SET updated_at = excluded.updated_at, doc = excluded.doc",
        )
        .await?;
        copy_in(
            &tx,
            "COPY runs (ns, agent_id, run_id, turn_number, doc) FROM STDIN",
            sink.runs,
        )
        .await?;
        copy_in(
            &tx,
            "COPY run_events (ns, run_id, seq, event_type, payload, payload_ref, idempotency_key, created_at) FROM STDIN",
            sink.events,
        )
        .await?;
        copy_in(
            &tx,
            "COPY run_seqs (ns, run_id, last_seq) FROM STDIN",
            sink.seqs,
        )
        .await?;
        tx.commit().await?;
        r = end;
    }
    client
        .batch_execute("ANALYZE agents, runs, run_events, run_seqs")
        .await?;
    // The fill's dirty buffers written out now, not by a checkpoint during the measurements.
    if let Err(e) = client.batch_execute("CHECKPOINT").await {
        eprintln!("  growth: CHECKPOINT after the fill: {e} (needs superuser or pg_checkpoint)");
    }
    Ok(())
}

/// Drops the bench's PostgreSQL schema (the scratch data of a growth run).
pub async fn pg_drop(url: &str, schema: &str) -> anyhow::Result<()> {
    let c = pg_connect(url, "public").await?;
    c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
        .await?;
    Ok(())
}
