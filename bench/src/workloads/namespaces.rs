//! `namespaces` (issue 12): the `append` workload against a daemon whose config has N
//! `[[namespaces]]` (100 by default), each with its own generated store and tool tokens,
//! compared in the same run with the same appends against a daemon with no `[[namespaces]]`
//! (one namespace, `default`): the issue's "append rate with 100 namespaces configured is
//! within 5% of one namespace".
//!
//! Both daemons are started here, each on its own scratch database with the same settings,
//! and stay up side by side (the idle one costs nothing); the server under test of the other
//! workloads is not used, so what they stored does not weigh on either side. Per client
//! count and repeat, three phases, in turn (the order reversed on every other repeat, so a
//! drift of the machine's load over a repeat weighs on both sides alike):
//!
//! - `one`: the one-namespace daemon, its `[auth]` store token;
//! - `1 token`: the N-namespace daemon, every append with the store token of its last
//!   namespace (the one a token lookup that walks the list in order finds last);
//! - `K tokens`: the N-namespace daemon, run `r` in namespace `r % K` (K = `--ns-spread`, all
//!   N by default, at most one per run), so one connection carries the tokens of several
//!   namespaces and every namespace is written.
//!
//! Each is checked as `append` checks (seqs 1..E per run, read back through the run's own
//! namespace). The ratio of a repeat is its N-namespace rate over the one-namespace rate of
//! the same repeat; the row shown is the repeat with the median ratio.

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

/// `[[namespaces]]` entries `ns-000`.. with generated tokens; returns the TOML and the store
/// tokens.
pub fn config(n: usize, seed: u64) -> (String, Vec<String>) {
    let mut rng = Rng::new(seed);
    let mut text = String::new();
    let mut tokens = Vec::with_capacity(n);
    for i in 0..n {
        let store = rng.hex64();
        let tool = rng.hex64();
        text.push_str(&format!(
            "\n[[namespaces]]\nname = \"ns-{i:03}\"\nstore_token = \"{store}\"\ntool_token = \"{tool}\"\n"
        ));
        tokens.push(store);
    }
    (text, tokens)
}

pub async fn start(s: &Setup<'_>) -> anyhow::Result<Daemons> {
    let (one, ready_one, dir_one) = spawn(s, "one", "").context("the one-namespace daemon")?;
    let seed = u64::from_str_radix(s.tag, 16).unwrap_or(1);
    let (extra, tokens) = config(s.namespaces, seed);
    let (many, ready_many, dir_many) = spawn(s, "many", &extra)
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

fn spawn(
    s: &Setup<'_>,
    which: &str,
    extra: &str,
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
    // The default namespace's tokens (env), distinct from the generated ones.
    let token = format!("bench-{}-{which}", s.tag);
    let (target, ready) = target::spawn_callbackd(&Spawn {
        bin: s.bin,
        db: &db,
        config: Some(&config_path),
        token: &token,
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
            let label = format!("ns{c}r{rep}");
            let spread_label = format!("{label}s");
            // (daemon, workload, label): the order alternates between repeats.
            let mut order: Vec<(&Target, &Arc<append::Append>, &str)> = vec![
                (&d.one, &one, &label),
                (&d.many, &last, &label),
                (&d.many, &spread_a, &spread_label),
            ];
            if rep % 2 == 1 {
                order.reverse();
            }
            let mut out = Vec::with_capacity(3);
            for (target, work, label) in order {
                out.push(append::run(target, work, label, c, true).await?);
            }
            if rep % 2 == 1 {
                out.reverse();
            }
            let mut out = out.into_iter();
            let (r_one, r_last, r_spread) = (
                out.next().expect("3"),
                out.next().expect("3"),
                out.next().expect("3"),
            );
            eprintln!(
                "  namespaces ×{c} repeat {rep}: one {:.0}, {} namespaces with 1 token {:.0}, with {spread} tokens {:.0} calls/s",
                r_one.rate(),
                d.tokens.len(),
                r_last.rate(),
                r_spread.rate(),
            );
            // The reference of a repeat is shared by its two rows.
            many.pairs.push((r_spread, r_one.clone()));
            single.pairs.push((r_last, r_one));
        }
        rows.push(single);
        rows.push(many);
    }
    Ok(rows)
}
