//! `floor` (issue 26): the store alone, with no daemon in the way.
//!
//! The bench does the store work of `append` and `replay` itself, straight on the started
//! daemon's database, with the daemon's statements and durability: an append at one client
//! is one transaction (`BEGIN IMMEDIATE`, the run's next seq, the insert, `COMMIT`); under
//! N clients the daemon's writer takes the appends queued meanwhile, each in a savepoint,
//! into one transaction, and here every transaction takes N (the best case of that
//! grouping). A replay page is the daemon's query (101 rows asked, 100 kept) with every
//! column read out. No HTTP, Connect, JSON, namespaces, quotas, logs or thread hand-offs:
//! what is left is what SQLite or PostgreSQL costs per call on this machine.
//!
//! How to read it. At one client the daemon's time per append is a round trip (what the
//! null server takes) plus the store's work, so its rate is at most
//! `1 / (1/null + 1/floor)`: it can reach half the null server's rate only if the store
//! alone is at least as fast as the null server (`× null` ≥ 1 in the floor's row). For
//! replay, PostgreSQL's floor against SQLite's daemon (two runs of the bench) bounds the
//! PostgreSQL ÷ SQLite ratio the daemon can show. On PostgreSQL only replay is measured:
//! its append is one statement of the daemon's own (`store/postgres/append.rs`), which the
//! bench does not copy.

use std::time::Instant;

use anyhow::Context;

use super::growth_fill::{self as fill, Store, NS};
use super::Measured;
use crate::gen::Payloads;

/// Events a replay page returns (as `replay::PAGE`).
const PAGE: i64 = 100;

/// One phase of appends: `runs × events` appends of `payloads`, in transactions of
/// `group` appends (1: each append its own transaction, as a lone append is). SQLite only.
pub struct Appends<'a> {
    pub db: &'a std::path::Path,
    /// `PRAGMA synchronous` of the daemon (`normal` or `full`).
    pub sync: &'a str,
    pub label: &'a str,
    pub runs: usize,
    pub events: usize,
    pub group: usize,
    pub payloads: &'a Payloads,
}

/// Runs one append phase; every run then holds seqs 1..=events (checked).
pub fn append(a: &Appends<'_>) -> anyhow::Result<Measured> {
    let conn = fill::sqlite_open(a.db)?;
    // The write connection's settings (store/sqlite): the checkpoint backstop of 10,000
    // pages, so that no checkpoint lands inside the timed commits (the daemon runs its
    // checkpoints on a thread of their own).
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {}; PRAGMA wal_autocheckpoint = 10000;",
        a.sync
    ))?;
    let agent = format!("agent-{}", a.label);
    let run_ids: Vec<String> = (0..a.runs)
        .map(|r| format!("run-{}-{r}", a.label))
        .collect();
    let total = a.runs * a.events;
    // Payloads made before the clock starts, as the clients' request bodies are.
    let payloads: Vec<String> = (0..total)
        .map(|k| a.payloads.payload(&agent, &run_ids[k % a.runs], k))
        .collect();
    let group = a.group.max(1);
    let mut next_seq = conn.prepare_cached(
        "SELECT COALESCE(MAX(seq), 0) + 1 FROM run_events WHERE ns = ?1 AND run_id = ?2",
    )?;
    let mut insert = conn.prepare_cached(
        "INSERT INTO run_events (ns, run_id, seq, event_type, payload, payload_ref, idempotency_key, created_at) \
         VALUES (?1, ?2, ?3, 'run_stream_event', ?4, NULL, NULL, ?5)",
    )?;
    let mut latencies = Vec::with_capacity(total);
    let started = Instant::now();
    let mut k = 0;
    while k < total {
        let t0 = Instant::now();
        let end = (k + group).min(total);
        conn.execute("BEGIN IMMEDIATE", [])?;
        for (j, payload) in payloads.iter().enumerate().take(end).skip(k) {
            if group > 1 {
                conn.execute("SAVEPOINT job", [])?;
            }
            let run = &run_ids[j % a.runs];
            let seq: i64 = next_seq.query_row(rusqlite::params![NS, run], |r| r.get(0))?;
            insert.execute(rusqlite::params![NS, run, seq, payload, now_ms()])?;
            if group > 1 {
                conn.execute("RELEASE job", [])?;
            }
        }
        conn.execute("COMMIT", [])?;
        let took = t0.elapsed().as_nanos() as u64;
        latencies.extend(std::iter::repeat_n(took, end - k));
        k = end;
    }
    let wall = started.elapsed();
    drop((next_seq, insert));
    let mut m = Measured {
        calls: total,
        wall,
        ..Measured::default()
    };
    latencies.sort_unstable();
    m.latencies = latencies;
    // Untimed: every run numbered 1..=events, and the WAL copied back as the daemon would.
    for run in &run_ids {
        let (n, max): (i64, i64) = conn.query_row(
            "SELECT count(*), COALESCE(MAX(seq), 0) FROM run_events WHERE ns = ?1 AND run_id = ?2",
            rusqlite::params![NS, run],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        if n != a.events as i64 || max != a.events as i64 {
            m.wrong(format!("{run}: {n} events, last seq {max}"));
        }
    }
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))?;
    Ok(m)
}

/// The run a replay phase reads: `events` events of `payloads` written straight into the
/// store (one transaction, untimed); returns its id.
pub async fn replay_setup(
    store: &Store,
    label: &str,
    events: usize,
    payloads: &Payloads,
) -> anyhow::Result<String> {
    let agent = format!("agent-{label}");
    let run = format!("run-{label}");
    let rows: Vec<String> = (0..events)
        .map(|k| payloads.payload(&agent, &run, k))
        .collect();
    match store {
        Store::Sqlite(path) => {
            let mut conn = fill::sqlite_open(path)?;
            let tx = conn.transaction()?;
            {
                let mut insert = tx.prepare(
                    "INSERT INTO run_events (ns, run_id, seq, event_type, payload, payload_ref, idempotency_key, created_at) \
                     VALUES (?1, ?2, ?3, 'run_stream_event', ?4, NULL, NULL, ?5)",
                )?;
                for (i, p) in rows.iter().enumerate() {
                    insert.execute(rusqlite::params![NS, run, i as i64 + 1, p, now_ms()])?;
                }
            }
            tx.commit()?;
        }
        Store::Postgres { url, schema } => {
            let mut c = fill::pg_connect(url, schema).await?;
            let tx = c.transaction().await?;
            let insert = tx
                .prepare(
                    "INSERT INTO run_events (ns, run_id, seq, event_type, payload, payload_ref, idempotency_key, created_at) \
                     VALUES ($1, $2, $3, 'run_stream_event', $4, NULL, NULL, $5)",
                )
                .await?;
            for (i, p) in rows.iter().enumerate() {
                tx.execute(&insert, &[&NS, &run, &(i as i64 + 1), p, &now_ms()])
                    .await?;
            }
            tx.commit().await?;
            // As the daemon's tables are after a while: statistics for the planner.
            c.batch_execute("ANALYZE run_events").await?;
        }
    }
    Ok(run)
}

/// Reads the run in pages of 100, `passes` times over; every page is checked (its size and
/// seqs), its rows read out column by column.
pub async fn replay(
    store: &Store,
    run: &str,
    events: usize,
    passes: usize,
) -> anyhow::Result<Measured> {
    const SQL: &str = "SELECT seq, event_type, payload, payload_ref, idempotency_key, created_at \
                       FROM run_events WHERE ns = $1 AND run_id = $2 AND seq > $3 ORDER BY seq LIMIT $4";
    let pages = events.div_ceil(PAGE as usize);
    let mut m = Measured::default();
    let mut latencies: Vec<u64> = Vec::with_capacity(pages * passes);
    let check = |m: &mut Measured, page: usize, seqs: &[i64]| {
        let first = page as i64 * PAGE + 1;
        let want = (events as i64 - first + 1).clamp(0, PAGE + 1) as usize;
        let contiguous = seqs.iter().enumerate().all(|(i, &s)| s == first + i as i64);
        if seqs.len() != want || !contiguous {
            m.wrong(format!(
                "page {page}: {} rows from seq {:?}",
                seqs.len(),
                seqs.first()
            ));
        }
    };
    let mut page_read = |m: &mut Measured, page: usize, t0: Instant, rows: &[EventRow]| {
        latencies.push(t0.elapsed().as_nanos() as u64);
        let seqs: Vec<i64> = rows.iter().map(|r| r.seq).collect();
        if rows.iter().any(|r| r.bytes() == 0) {
            m.wrong(format!("page {page}: an empty row"));
        }
        check(m, page, &seqs);
    };
    let started;
    match store {
        Store::Sqlite(path) => {
            let conn = fill::sqlite_open(path)?;
            let mut stmt = conn.prepare_cached(&SQL.replace('$', "?"))?;
            started = Instant::now();
            for _ in 0..passes {
                for page in 0..pages {
                    let t0 = Instant::now();
                    let after = page as i64 * PAGE;
                    let rows = stmt
                        .query_map(rusqlite::params![NS, run, after, PAGE + 1], |r| {
                            Ok(EventRow {
                                seq: r.get(0)?,
                                event_type: r.get(1)?,
                                payload: r.get(2)?,
                                payload_ref: r.get(3)?,
                                key: r.get(4)?,
                                created: r.get(5)?,
                            })
                        })?
                        .collect::<Result<Vec<_>, _>>()?;
                    page_read(&mut m, page, t0, &rows);
                }
            }
        }
        Store::Postgres { url, schema } => {
            let c = fill::pg_connect(url, schema).await?;
            let stmt = c.prepare(SQL).await.context("preparing the page query")?;
            started = Instant::now();
            for _ in 0..passes {
                for page in 0..pages {
                    let t0 = Instant::now();
                    let after = page as i64 * PAGE;
                    let rows: Vec<EventRow> = c
                        .query(&stmt, &[&NS, &run, &after, &(PAGE + 1)])
                        .await?
                        .iter()
                        .map(|r| EventRow {
                            seq: r.get(0),
                            event_type: r.get(1),
                            payload: r.get(2),
                            payload_ref: r.get(3),
                            key: r.get(4),
                            created: r.get(5),
                        })
                        .collect();
                    page_read(&mut m, page, t0, &rows);
                }
            }
        }
    }
    m.wall = started.elapsed();
    m.calls = pages * passes;
    latencies.sort_unstable();
    m.latencies = latencies;
    Ok(m)
}

/// One event row read out column by column, as a server must before it can answer.
struct EventRow {
    seq: i64,
    event_type: String,
    payload: String,
    payload_ref: Option<String>,
    key: Option<String>,
    created: i64,
}

impl EventRow {
    /// What the row carries (a row read out as nothing is a wrong read).
    fn bytes(&self) -> usize {
        self.event_type.len()
            + self.payload.len()
            + self.payload_ref.as_ref().map_or(0, String::len)
            + self.key.as_ref().map_or(0, String::len)
            + usize::from(self.created > 0)
    }
}

fn now_ms() -> i64 {
    i64::try_from(super::now_ms()).unwrap_or(i64::MAX)
}
