//! `namespaces` (issue 12): the `append` workload against a daemon whose config has N
//! `[[namespaces]]` (100 by default), each with its own generated store and tool tokens,
//! compared in the same run with the same appends against a daemon with no `[[namespaces]]`
//! (one namespace, `default`): the issue's "append rate with 100 namespaces configured is
//! within 5% of one namespace".
//!
//! Both daemons are started here, each on its own scratch database with the same settings,
//! and stay up side by side (the idle one costs nothing); the server under test of the other
//! workloads is not used, so what they stored does not weigh on either side. Per client
//! count and repeat, two pairs of phases, each an N-namespace phase next to a one-namespace
//! phase (that one with its `[auth]` store token), the pair's order alternating between
//! repeats, so that both daemons store as much and a drift of the machine's load weighs on
//! both sides alike:
//!
//! - `1 token`: every append with the store token of the last namespace (the one a lookup
//!   that walked the list in order would find last);
//! - `K tokens`: run `r` in namespace `r % K` (K = `--ns-spread`, all N by default, at most
//!   one per run), so one connection carries the tokens of several namespaces and every
//!   namespace is written.
//!
//! Each is checked as `append` checks (seqs 1..E per run, read back through the run's own
//! namespace). The ratio of a pair is its N-namespace rate over its one-namespace rate; the
//! row shown is the repeat with the median ratio.
//!
//! Two things that would otherwise be measured as a cost of namespaces: every store token on
//! both daemons is 64 hex digits (a token's SHA-256 costs by its length), and run ids start
//! with a random prefix on both (as the bridge's random ids do; `--ns-clustered-ids` turns
//! that off): with `run-{tag}-{phase}-{r}` ids, one namespace's phase writes one region of
//! the `(ns, run_id, seq)` index while 100 namespaces' phase writes 100 regions, and the
//! difference is the index's locality, not the namespaces (BENCHMARKS.md, "Namespaces").

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use super::{append, Measured};
use crate::client::bearer;
use crate::gen::Rng;
use crate::target::{self, rss_kib, ScratchDir, Spawn, Target};

/// How the two daemons are made.
pub struct Setup<'a> {
    pub bin: &'a std::path::Path,
    pub db_dir: Option<&'a std::path::Path>,
    /// `store.sync`.
    pub sync: &'a str,
    /// With PostgreSQL: its URL; each daemon gets a schema of its own.
    pub pg_url: Option<&'a str>,
    pub tag: &'a str,
    /// Namespaces in the config of the second daemon.
    pub namespaces: usize,
    /// Give every namespace quotas (too high to be reached): the quota gate's cost.
    pub quotas: bool,
}

/// The two daemons, and what their start said.
pub struct Daemons {
    pub one: Target,
    pub many: Target,
    /// The store tokens of the N namespaces, in config order.
    pub tokens: Vec<String>,
    pub ready_one: Duration,
    pub ready_many: Duration,
    pub idle_rss_one: Option<u64>,
    pub idle_rss_many: Option<u64>,
    /// Removed after the daemons (declared last: dropped last).
    _dirs: (ScratchDir, ScratchDir),
}

/// `[[namespaces]]` entries `ns-000`.. with generated tokens (and with `quotas`, quotas
/// that the bench never reaches); returns the TOML and the store tokens.
pub fn config(n: usize, seed: u64, quotas: bool) -> (String, Vec<String>) {
    let mut rng = Rng::new(seed);
    let mut text = String::new();
    let mut tokens = Vec::with_capacity(n);
    for i in 0..n {
        let store = rng.hex64();
        let tool = rng.hex64();
        text.push_str(&format!(
            "\n[[namespaces]]\nname = \"ns-{i:03}\"\nstore_token = \"{store}\"\ntool_token = \"{tool}\"\n"
        ));
        if quotas {
            text.push_str(
                "[namespaces.quotas]\nmax_agents = 1_000_000\nmax_stored_bytes = 1_000_000_000_000\n\
                 max_events_per_run = 1_000_000_000\nmax_appends_per_second = 1_000_000\n",
            );
        }
        tokens.push(store);
    }
    (text, tokens)
}

pub async fn start(s: &Setup<'_>) -> anyhow::Result<Daemons> {
    let seed = u64::from_str_radix(s.tag, 16).unwrap_or(1);
    // The default namespace's store token, 64 hex digits like every generated one: a token's
    // length is what its SHA-256 costs (two blocks from 56 bytes on), and a shorter one on
    // the one-namespace side would be measured as a cost of namespaces.
    let default_token = |k: u64| Rng::new(seed ^ (k << 56)).hex64();
    let (one, ready_one, dir_one) =
        spawn(s, "one", "", &default_token(1)).context("the one-namespace daemon")?;
    let (extra, tokens) = config(s.namespaces, seed, s.quotas);
    let (many, ready_many, dir_many) = spawn(s, "many", &extra, &default_token(2))
        .with_context(|| format!("the daemon with {} namespaces", s.namespaces))?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss = |t: &Target| t.pid.and_then(rss_kib).map(|r| r.0);
    Ok(Daemons {
        idle_rss_one: rss(&one),
        idle_rss_many: rss(&many),
        one,
        many,
        tokens,
        ready_one,
        ready_many,
        _dirs: (dir_one, dir_many),
    })
}

/// A daemon on a scratch database of its own, `extra` appended to its config.
pub fn spawn(
    s: &Setup<'_>,
    which: &str,
    extra: &str,
    token: &str,
) -> anyhow::Result<(Target, Duration, ScratchDir)> {
    let dir = ScratchDir::new(s.db_dir)?;
    let config_path = dir.0.join("callbackd.toml");
    let mut config = format!("[store]\nsync = \"{}\"\n", s.sync);
    let db = match s.pg_url {
        Some(url) => {
            config.push_str(&format!("schema = \"bench_{}_{which}\"\n", s.tag));
            PathBuf::from(url)
        }
        None => dir.0.join("callbackd.db"),
    };
    config.push_str(extra);
    std::fs::write(&config_path, config)?;
    let (target, ready) = target::spawn_callbackd(&Spawn {
        bin: s.bin,
        db: &db,
        config: Some(&config_path),
        token,
    })?;
    Ok((target, ready, dir))
}

/// One row: a client count and a token spread, every repeat's (N namespaces, one) pair.
pub struct NsRow {
    pub clients: usize,
    /// Namespaces the appends were spread over (1: one token).
    pub tokens: usize,
    pub pairs: Vec<(Measured, Measured)>,
}

/// Runs every phase; `a` gives the sizes (its `auth` is set here per phase).
pub async fn run(
    d: &Daemons,
    a: &append::Append,
    clients: &[usize],
    spread: usize,
    reps: usize,
) -> anyhow::Result<Vec<NsRow>> {
    let spread = spread.clamp(1, d.tokens.len().min(a.runs).max(1));
    let with_auth = |tokens: &[String]| -> anyhow::Result<Arc<append::Append>> {
        Ok(Arc::new(append::Append {
            tag: a.tag.clone(),
            runs: a.runs,
            events: a.events,
            payloads: a.payloads.clone(),
            auth: tokens.iter().map(|t| bearer(t)).collect::<Result<_, _>>()?,
            scatter: a.scatter,
            finish: false,
        }))
    };
    let one = with_auth(&[])?;
    let last = with_auth(&d.tokens[d.tokens.len() - 1..])?;
    let spread_a = with_auth(&d.tokens[..spread])?;
    let mut rows = Vec::new();
    for &c in clients {
        let mut single = NsRow {
            clients: c,
            tokens: 1,
            pairs: Vec::new(),
        };
        let mut many = NsRow {
            clients: c,
            tokens: spread,
            pairs: Vec::new(),
        };
        for rep in 0..reps {
            // Each N-namespace phase next to a one-namespace phase of its own, the pair's
            // order alternating between repeats: adjacent phases see the same load, and each
            // daemon stores as much as the other (a larger database is a slower one).
            for (row, work, suffix) in [(&mut single, &last, "t"), (&mut many, &spread_a, "s")] {
                let label = format!("ns{c}r{rep}{suffix}");
                let (m, o) = if rep % 2 == 0 {
                    let o = append::run(&d.one, &one, &label, c, true).await?;
                    (append::run(&d.many, work, &label, c, true).await?, o)
                } else {
                    let m = append::run(&d.many, work, &label, c, true).await?;
                    (m, append::run(&d.one, &one, &label, c, true).await?)
                };
                eprintln!(
                    "  namespaces ×{c} repeat {rep}, {} token{}: {:.0} calls/s with {} namespaces, {:.0} with one",
                    row.tokens,
                    if row.tokens == 1 { "" } else { "s" },
                    m.rate(),
                    d.tokens.len(),
                    o.rate(),
                );
                row.pairs.push((m, o));
            }
        }
        rows.push(single);
        rows.push(many);
    }
    Ok(rows)
}
