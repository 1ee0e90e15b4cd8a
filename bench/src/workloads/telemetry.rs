//! `telemetry` (issue 23): the `append` workload with OpenTelemetry traces exported, against
//! the same workload with no `[telemetry]`, in one bench run: the issue's "append rate with
//! telemetry on within 5% of off".
//!
//! Two daemons, each on its own scratch database with the same settings; the second exports
//! traces (`[telemetry] otlp_endpoint`) to a null OTLP sink (the bench's null server, which
//! answers every POST at once). So that telemetry has work to do, every run ends: its run
//! document is created before the phase, and its last event is its terminal `status
//! FINISHED` (on both daemons), so the exporting daemon reads each run back from the store
//! (document, events, tool records, approvals) and exports its span while the other runs are
//! still being appended to. Per client count and repeat, an "on" phase next to an "off" one,
//! the pair's order alternating between repeats (as `namespaces` does); the ratio of a pair
//! is on/off, the figure printed the median over the repeats, with their spread. The spans
//! the sink accepted and those dropped are read from the exporting daemon's `/metrics`.

use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::namespaces::{spawn, Setup};
use super::{append, Measured};
use crate::target::Target;

/// One client count: every repeat's (on, off) pair.
pub struct TelRow {
    pub clients: usize,
    pub pairs: Vec<(Measured, Measured)>,
}

pub async fn run(
    s: &Setup<'_>,
    sink: &Target,
    a: &append::Append,
    clients: &[usize],
    reps: usize,
) -> anyhow::Result<()> {
    let token = |k: u64| crate::gen::Rng::new(0x7e1e ^ (k << 56)).hex64();
    // Declared first, dropped last: the scratch directories outlive the daemons.
    let mut dirs = Vec::new();
    let (off, _, dir) = spawn(s, "off", "", &token(1)).context("the daemon without telemetry")?;
    dirs.push(dir);
    let extra = format!(
        "\n[telemetry]\notlp_endpoint = \"http://{}/v1/traces\"\n",
        sink.ep.addr
    );
    let (on, _, dir) = spawn(s, "on", &extra, &token(2)).context("the daemon with telemetry")?;
    dirs.push(dir);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let a = std::sync::Arc::new(append::Append {
        tag: a.tag.clone(),
        runs: a.runs,
        events: a.events,
        payloads: a.payloads.clone(),
        auth: Vec::new(),
        scatter: true,
        finish: true,
    });
    let mut rows = Vec::new();
    for &c in clients {
        let mut row = TelRow {
            clients: c,
            pairs: Vec::new(),
        };
        for rep in 0..reps {
            let label = format!("tel{c}r{rep}");
            let (m_on, m_off) = if rep % 2 == 0 {
                let o = append::run(&off, &a, &label, c, true).await?;
                (append::run(&on, &a, &label, c, true).await?, o)
            } else {
                let m = append::run(&on, &a, &label, c, true).await?;
                (m, append::run(&off, &a, &label, c, true).await?)
            };
            eprintln!(
                "  telemetry ×{c} repeat {rep}: {:.0} calls/s with telemetry, {:.0} without",
                m_on.rate(),
                m_off.rate()
            );
            row.pairs.push((m_on, m_off));
        }
        rows.push(row);
    }
    // Let the last runs' spans go out before reading the counters.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let metrics = get_metrics(&on).await.unwrap_or_default();
    let counter = |name: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or("?")
            .to_string()
    };
    println!();
    println!(
        "telemetry: append with [telemetry] exporting to a null OTLP sink vs without ({} runs × {} events per phase, every run ending; median of {reps} alternating pairs)",
        a.runs, a.events
    );
    println!(
        "{:>8} {:>14} {:>14} {:>8} {:>16} {:>16} {:>16}",
        "clients",
        "on calls/s",
        "off calls/s",
        "on/off",
        "ratio range",
        "on CPU µs/call",
        "off CPU µs/call"
    );
    for row in &rows {
        let mut ratios: Vec<(f64, usize)> = row
            .pairs
            .iter()
            .enumerate()
            .map(|(i, (m_on, m_off))| (m_on.rate() / m_off.rate().max(1e-9), i))
            .collect();
        ratios.sort_by(|x, y| x.0.total_cmp(&y.0));
        let (ratio, i) = ratios[ratios.len() / 2];
        let (m_on, m_off) = &row.pairs[i];
        let cpu = |m: &Measured| {
            m.server_cpu
                .map(|c| format!("{:.1}", c.as_secs_f64() * 1e6 / m.calls.max(1) as f64))
                .unwrap_or_else(|| "?".into())
        };
        println!(
            "{:>8} {:>14.0} {:>14.0} {:>8.3} {:>16} {:>16} {:>16}",
            row.clients,
            m_on.rate(),
            m_off.rate(),
            ratio,
            format!("{:.3}-{:.3}", ratios[0].0, ratios[ratios.len() - 1].0),
            cpu(m_on),
            cpu(m_off),
        );
        for (m, which) in [(m_on, "on"), (m_off, "off")] {
            anyhow::ensure!(
                m.errors == 0 && m.wrong == 0,
                "telemetry ×{} ({which}): {} errors, {} wrong: {:?}",
                row.clients,
                m.errors,
                m.wrong,
                m.examples
            );
        }
    }
    println!(
        "spans exported: {}, dropped: {} (callbackd_telemetry_spans_*_total of the exporting daemon)",
        counter("callbackd_telemetry_spans_exported_total"),
        counter("callbackd_telemetry_spans_dropped_total")
    );
    Ok(())
}

/// `GET /metrics` of a daemon (no token: the bench's daemons have none).
async fn get_metrics(t: &Target) -> anyhow::Result<String> {
    let mut stream = tokio::net::TcpStream::connect(t.ep.addr).await?;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
        .await?;
    let mut out = Vec::new();
    stream.read_to_end(&mut out).await?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}
