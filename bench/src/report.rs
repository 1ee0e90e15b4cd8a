//! The printed report: machine facts, one table row per phase with its ratio to the null
//! server, the server's memory and start-up figures, and issue 5's targets checked.

use std::time::Duration;

use crate::workloads::Measured;

/// One phase against the server and, when run, the same phase against the null server.
pub struct Row {
    pub workload: &'static str,
    pub clients: usize,
    pub real: Measured,
    pub null: Option<Measured>,
    pub note: String,
    /// Lowest and highest ratio (or calls/s without a null server) over the repeats.
    spread: Option<(f64, f64)>,
    /// Errors and wrong answers of all repeats.
    failures: u64,
}

impl Row {
    /// The repeat with the median ratio (the median calls/s without a null server).
    pub fn median(
        workload: &'static str,
        clients: usize,
        pairs: Vec<(Measured, Option<Measured>)>,
    ) -> Row {
        let failures = pairs.iter().map(|(m, _)| m.errors + m.wrong).sum();
        let mut rows: Vec<Row> = pairs
            .into_iter()
            .map(|(real, null)| Row {
                workload,
                clients,
                real,
                null,
                note: String::new(),
                spread: None,
                failures: 0,
            })
            .collect();
        let key = |r: &Row| r.ratio().unwrap_or_else(|| r.real.rate());
        rows.sort_by(|a, b| key(a).total_cmp(&key(b)));
        let spread = (rows.len() > 1).then(|| (key(&rows[0]), key(&rows[rows.len() - 1])));
        let mut row = rows.swap_remove(rows.len() / 2);
        row.spread = spread;
        row.failures = failures;
        // A failure in any repeat must show, whichever repeat is printed.
        for other in &rows {
            for e in &other.real.examples {
                row.real.examples.push(format!("(another repeat) {e}"));
            }
        }
        row
    }

    pub fn note(mut self, note: String) -> Row {
        self.note = note;
        self
    }

    fn spread(&self) -> String {
        match (self.spread, self.null.is_some()) {
            (Some((lo, hi)), true) => format!("{lo:.2}–{hi:.2}"),
            (Some((lo, hi)), false) => format!("{lo:.0}–{hi:.0}"),
            (None, _) => "–".into(),
        }
    }

    fn ratio(&self) -> Option<f64> {
        self.null.as_ref().map(|n| self.real.rate() / n.rate())
    }
}

#[derive(Default)]
pub struct Report {
    pub quick: bool,
    pub server: String,
    pub ready_fresh: Option<Duration>,
    pub ready_populated: Option<Duration>,
    pub idle_rss_start: Option<u64>,
    pub idle_rss_end: Option<u64>,
    pub reps: usize,
    rows: Vec<Row>,
    setups: Vec<(String, u64)>,
    /// `stream` rows, already formatted, and whether each had wrong deliveries.
    streams: Vec<(String, bool)>,
    namespaces: Option<Namespaces>,
    /// The `growth` workload's rows and the backend's name.
    growth: Option<(Vec<crate::workloads::growth::GrowthRow>, &'static str)>,
}

/// The `namespaces` workload: its rows and the two daemons' start figures.
pub struct Namespaces {
    pub count: usize,
    /// Whether each namespace had quotas (set too high to be reached).
    pub quotas: bool,
    pub rows: Vec<crate::workloads::namespaces::NsRow>,
    pub ready_one: Duration,
    pub ready_many: Duration,
    pub idle_rss_one: Option<u64>,
    pub idle_rss_many: Option<u64>,
}

impl crate::workloads::namespaces::NsRow {
    /// N namespaces ÷ one, per repeat, sorted; and the index of the median repeat in
    /// `pairs`.
    fn ratios(&self) -> (Vec<f64>, usize) {
        let mut by_ratio: Vec<(f64, usize)> = self
            .pairs
            .iter()
            .enumerate()
            .map(|(i, (many, one))| (many.rate() / one.rate().max(1e-9), i))
            .collect();
        by_ratio.sort_by(|a, b| a.0.total_cmp(&b.0));
        let median = by_ratio[by_ratio.len() / 2].1;
        (by_ratio.into_iter().map(|r| r.0).collect(), median)
    }

    /// The median repeat's ratio.
    pub fn ratio(&self) -> f64 {
        let (sorted, _) = self.ratios();
        sorted[sorted.len() / 2]
    }

    fn failures(&self) -> u64 {
        self.pairs
            .iter()
            .map(|(m, o)| m.errors + m.wrong + o.errors + o.wrong)
            .sum()
    }

    /// The slowest call of one side over every repeat (a stall shows here, whichever repeat
    /// is the median).
    fn max_latency(&self, many: bool) -> Duration {
        self.pairs
            .iter()
            .map(|(m, o)| if many { m } else { o }.quantile(1.0))
            .max()
            .unwrap_or_default()
    }

    /// Server CPU per call over every repeat of one side (`many`: the N-namespace daemon),
    /// steadier than one repeat's 10 ms ticks.
    fn cpu_per_call(&self, many: bool) -> Option<Duration> {
        let mut cpu = Duration::ZERO;
        let mut calls = 0;
        for (m, o) in &self.pairs {
            let side = if many { m } else { o };
            cpu += side.server_cpu?;
            calls += side.calls;
        }
        Some(cpu / u32::try_from(calls.max(1)).unwrap_or(u32::MAX))
    }
}

impl Report {
    pub fn new(quick: bool) -> Report {
        Report {
            quick,
            ..Report::default()
        }
    }

    pub fn add(&mut self, row: Row) {
        eprintln!(
            "  {} ×{}: {:.0} calls/s{}",
            row.workload,
            row.clients,
            row.real.rate(),
            row.ratio()
                .map_or_else(String::new, |r| format!(" ({r:.2}× null)"))
        );
        self.rows.push(row);
    }

    pub fn setup(&mut self, what: &str, m: &Measured) {
        let line = crate::setup_line(what, m);
        eprintln!("  {line}");
        self.setups.push((line, m.errors + m.wrong));
        for e in &m.examples {
            self.setups.push((format!("    {e}"), 0));
        }
    }

    /// Phases with errors or wrong answers.
    pub fn failures(&self) -> usize {
        self.rows.iter().filter(|r| r.failures > 0).count()
            + self.setups.iter().filter(|s| s.1 > 0).count()
            + self.streams.iter().filter(|s| s.1).count()
            + self
                .growth
                .iter()
                .flat_map(|g| &g.0)
                .filter(|r| r.failures() > 0)
                .count()
            + self
                .namespaces
                .iter()
                .flat_map(|n| &n.rows)
                .filter(|r| r.failures() > 0)
                .count()
    }

    /// The `growth` workload's rows.
    pub fn growth(
        &mut self,
        rows: Vec<crate::workloads::growth::GrowthRow>,
        backend: &'static str,
    ) {
        self.growth = Some((rows, backend));
    }

    /// The `namespaces` workload's rows.
    pub fn namespaces(&mut self, n: Namespaces) {
        for r in &n.rows {
            let (sorted, _) = r.ratios();
            eprintln!(
                "  namespaces ×{} ({} token{}): {:.2}× one namespace ({:.2}–{:.2})",
                r.clients,
                r.tokens,
                if r.tokens == 1 { "" } else { "s" },
                r.ratio(),
                sorted[0],
                sorted[sorted.len() - 1]
            );
        }
        self.namespaces = Some(n);
    }

    /// A `stream` phase (issue 9's targets: p99 ≤ 5 ms at 100 followers, append rate with
    /// followers ≥ 0.9× without).
    pub fn stream(&mut self, f: &crate::workloads::stream::StreamFigures) {
        let ratio = f.append_rate / f.append_rate_alone.max(1e-9);
        let line = format!(
            "| stream | {} | {} × {} | {} | {} | {} | {:.0} | {:.0} | {:.0} | {:.2} | {} |",
            f.followers,
            f.runs,
            f.events_per_run,
            dur(f.quantile(0.50)),
            dur(f.quantile(0.99)),
            dur(f.quantile(1.0)),
            f.delivered as f64 / f.wall.as_secs_f64().max(1e-9),
            f.append_rate,
            f.append_rate_alone,
            ratio,
            f.wrong,
        );
        eprintln!(
            "  stream ×{}: p99 {} append ×{ratio:.2} of alone",
            f.followers,
            dur(f.quantile(0.99))
        );
        self.streams.push((line, f.wrong > 0));
    }

    /// Idle open streams: the daemon's RSS growth per stream.
    pub fn stream_idle(&mut self, n: usize, kib_per_stream: f64, pid: u32) {
        self.streams.push((
            format!("idle streams: {n} open streams of one run cost the daemon (pid {pid}) {kib_per_stream:.1} KiB of RSS each"),
            false,
        ));
    }

    pub fn print(&self) {
        println!(
            "## callbackd-bench{}",
            if self.quick { " --quick" } else { "" }
        );
        println!();
        println!("machine: {}", machine());
        println!("server: {}", self.server);
        println!();
        println!(
            "| workload | clients | calls | calls/s | null calls/s | × null | spread | p50 | p95 | p99 | max | errors | server CPU/call | null CPU/call | bench CPU/call | server peak RSS |"
        );
        println!("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
        for r in &self.rows {
            let m = &r.real;
            let n = r.null.as_ref();
            println!(
                "| {} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.workload,
                r.clients,
                m.calls,
                m.rate(),
                n.map_or("–".into(), |n| format!("{:.0}", n.rate())),
                r.ratio().map_or("–".into(), |x| format!("{x:.2}")),
                r.spread(),
                dur(m.quantile(0.50)),
                dur(m.quantile(0.95)),
                dur(m.quantile(0.99)),
                dur(m.quantile(1.0)),
                r.failures,
                m.cpu_per_call().map_or("–".into(), dur),
                n.and_then(Measured::cpu_per_call).map_or("–".into(), dur),
                m.loadgen_cpu
                    .map_or("–".into(), |c| dur(c / m.calls.max(1) as u32)),
                m.peak_rss_kib.map_or("–".into(), mib),
            );
        }
        println!();
        for r in &self.rows {
            println!("- {} ×{}: {}", r.workload, r.clients, r.note);
        }
        for (line, _) in &self.setups {
            println!("- {line}");
        }
        println!();
        let opt = |d: Option<Duration>| {
            d.map_or("–".into(), |d| format!("{:.1} ms", d.as_secs_f64() * 1e3))
        };
        println!(
            "start to ready: {} (empty database), {} (restart on the populated database, after a SIGTERM stop)",
            opt(self.ready_fresh),
            opt(self.ready_populated)
        );
        println!(
            "idle RSS: {} after start, {} after the workloads",
            self.idle_rss_start.map_or("–".into(), mib),
            self.idle_rss_end.map_or("–".into(), mib)
        );
        println!(
            "each row: the median of {} runs by ratio (spread: lowest–highest); errors: all runs; CPU: utime+stime from /proc (10 ms ticks) over the phase / its calls; peak RSS: VmHWM, reset before each phase",
            self.reps
        );
        for r in &self.rows {
            for e in r
                .real
                .examples
                .iter()
                .chain(r.null.iter().flat_map(|n| &n.examples))
            {
                println!("  {} ×{}: {e}", r.workload, r.clients);
            }
        }
        if !self.streams.is_empty() {
            println!();
            println!("| workload | followers | runs × events | delivery p50 | p99 | max | delivered/s | appends/s followed | appends/s alone | × alone | wrong |");
            println!("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
            for (line, _) in self.streams.iter().filter(|s| s.0.starts_with('|')) {
                println!("{line}");
            }
            for (line, _) in self.streams.iter().filter(|s| !s.0.starts_with('|')) {
                println!("{line}");
            }
        }
        self.print_namespaces();
        if let Some((rows, backend)) = &self.growth {
            crate::workloads::growth::print(rows, backend);
        }
        if !self.quick {
            self.print_targets();
        }
    }

    fn print_namespaces(&self) {
        let Some(ns) = &self.namespaces else { return };
        let n = ns.count;
        println!();
        println!(
            "### namespaces: append with {n} `[[namespaces]]`{} against one namespace (no `[[namespaces]]`), two daemons side by side, phases alternated",
            if ns.quotas { " (each with quotas it never reaches)" } else { "" }
        );
        println!();
        println!(
            "| clients | tokens | calls | calls/s, {n} ns | calls/s, one | × one | spread | p50 | p99 | p50, one | p99, one | max, {n} ns | max, one | server CPU/call, {n} ns | one | CPU × one | errors |"
        );
        println!("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
        for r in &ns.rows {
            let (sorted, median) = r.ratios();
            let (m, o) = &r.pairs[median];
            let spread = if sorted.len() > 1 {
                format!("{:.2}–{:.2}", sorted[0], sorted[sorted.len() - 1])
            } else {
                "–".into()
            };
            let (cpu_m, cpu_o) = (r.cpu_per_call(true), r.cpu_per_call(false));
            println!(
                "| {} | {} | {} | {:.0} | {:.0} | {:.3} | {spread} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.clients,
                r.tokens,
                m.calls,
                m.rate(),
                o.rate(),
                r.ratio(),
                dur(m.quantile(0.50)),
                dur(m.quantile(0.99)),
                dur(o.quantile(0.50)),
                dur(o.quantile(0.99)),
                dur(r.max_latency(true)),
                dur(r.max_latency(false)),
                cpu_m.map_or("–".into(), dur),
                cpu_o.map_or("–".into(), dur),
                match (cpu_m, cpu_o) {
                    (Some(a), Some(b)) if !b.is_zero() =>
                        format!("{:.3}", a.as_secs_f64() / b.as_secs_f64()),
                    _ => "–".into(),
                },
                r.failures(),
            );
        }
        println!();
        println!(
            "- tokens: 1 = every append with the store token of the last of the {n} namespaces; K = run r in namespace r % K, so each connection carries K namespaces' tokens"
        );
        println!(
            "- × one: the {n}-namespace daemon's calls/s over the one-namespace daemon's in the phase next to it (median repeat shown; spread: lowest–highest of {} repeats); max and server CPU/call: over all repeats",
            ns.rows.first().map_or(0, |r| r.pairs.len())
        );
        let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
        println!(
            "- start to ready: {} with {n} namespaces, {} with one; idle RSS after start: {} and {}",
            ms(ns.ready_many),
            ms(ns.ready_one),
            ns.idle_rss_many.map_or("–".into(), mib),
            ns.idle_rss_one.map_or("–".into(), mib),
        );
        for r in &ns.rows {
            for (m, o) in &r.pairs {
                for e in m.examples.iter().chain(&o.examples) {
                    println!("  namespaces ×{} ({} tokens): {e}", r.clients, r.tokens);
                }
            }
        }
    }

    fn print_targets(&self) {
        println!();
        println!("### targets (issue 5)");
        let find = |w: &str, c: usize| self.rows.iter().find(|r| r.workload == w && r.clients == c);
        let check = |name: String, ok: Option<bool>, got: String| {
            let mark = match ok {
                Some(true) => "met",
                Some(false) => "NOT MET",
                None => "not measured",
            };
            println!("- [{mark}] {name}: {got}");
        };
        let ratio = |r: Option<&Row>| r.and_then(Row::ratio);
        for (c, p99) in [
            (1, Duration::from_millis(1)),
            (64, Duration::from_millis(20)),
        ] {
            let row = find("append", c);
            check(
                format!("append ×{c} ≥ 0.5× null"),
                ratio(row).map(|x| x >= 0.5),
                ratio(row).map_or("–".into(), |x| format!("{x:.2}×")),
            );
            check(
                format!("append ×{c} p99 ≤ {}", dur(p99)),
                row.map(|r| r.real.quantile(0.99) <= p99),
                row.map_or("–".into(), |r| dur(r.real.quantile(0.99))),
            );
            if c == 64 {
                check(
                    "append ×64 zero errors".into(),
                    row.map(|r| r.real.errors + r.real.wrong == 0),
                    row.map_or("–".into(), |r| (r.real.errors + r.real.wrong).to_string()),
                );
                let rss = row.and_then(|r| r.real.peak_rss_kib);
                check(
                    "peak RSS under 64 clients ≤ 40 MB".into(),
                    rss.map(|k| k * 1024 <= 40_000_000),
                    rss.map_or("–".into(), mib),
                );
            }
        }
        let row = find("turn", 8);
        check(
            "turn ×8 ≥ 0.5× null".into(),
            ratio(row).map(|x| x >= 0.5),
            ratio(row).map_or("–".into(), |x| format!("{x:.2}×")),
        );
        for w in ["replay", "agents-list"] {
            let row = find(w, 1);
            check(
                format!("{w} ≥ 3,000 pages/s"),
                row.map(|r| r.real.rate() >= 3000.0),
                row.map_or("–".into(), |r| format!("{:.0} pages/s", r.real.rate())),
            );
        }
        let idle = match (self.idle_rss_start, self.idle_rss_end) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        check(
            "idle RSS ≤ 15 MB".into(),
            idle.map(|k| k * 1024 <= 15_000_000),
            idle.map_or("–".into(), |k| {
                format!("{} (the larger of the two)", mib(k))
            }),
        );
        check(
            "start to ready ≤ 100 ms".into(),
            self.ready_fresh.map(|d| d <= Duration::from_millis(100)),
            self.ready_fresh
                .map_or("–".into(), |d| format!("{:.1} ms", d.as_secs_f64() * 1e3)),
        );
        if let Some(ns) = &self.namespaces {
            println!();
            println!("### target (issue 12)");
            for r in &ns.rows {
                let (sorted, _) = r.ratios();
                check(
                    format!(
                        "append ×{} with {} namespaces ({} token{}) within 5% of one namespace",
                        r.clients,
                        ns.count,
                        r.tokens,
                        if r.tokens == 1 { "" } else { "s" }
                    ),
                    Some(r.ratio() >= 0.95),
                    format!(
                        "{:.3}× (repeats {:.2}–{:.2})",
                        r.ratio(),
                        sorted[0],
                        sorted[sorted.len() - 1]
                    ),
                );
            }
        }
    }
}

fn dur(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.0} µs")
    } else {
        format!("{:.2} ms", us / 1000.0)
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    format!(
        "{cores} cores ({model}), Linux {}, load average {} at the end",
        kernel.trim(),
        load.join(" ")
    )
}
