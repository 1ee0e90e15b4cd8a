//! `append`: R runs × E events of 0.5–3 KB, spread over the clients so that several clients
//! append to the same run at once (the hard case for gap-free numbering).
//!
//! Checks: every answer is the event document of its run; per run the seqs answered are
//! exactly 1..E; afterwards each run's last event reads back as seq E with no `nextOffset`.
//!
//! With [`Append::auth`] set, run `r` belongs to namespace `r % auth.len()`: its appends and
//! its read-back carry that namespace's token (the `namespaces` workload).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use http::HeaderValue;
use serde::Deserialize;

use super::{measure, Measured};
use crate::client::{Conn, Recorder};
use crate::gen::{self, Payloads};
use crate::target::Target;

pub struct Append {
    /// Unique per bench run, so runs never collide with earlier data.
    pub tag: String,
    pub runs: usize,
    pub events: usize,
    pub payloads: Arc<Payloads>,
    /// Store tokens (`Authorization` values) the runs are spread over, run `r` on
    /// `auth[r % len]`; empty: every call carries the endpoint's token.
    pub auth: Vec<HeaderValue>,
    /// Run ids that start with a pseudo-random prefix, so that a phase's runs scatter over
    /// the store's indexes as the bridge's random run ids do; false: `run-{tag}-{label}-{r}`,
    /// a phase's runs side by side in every index.
    pub scatter: bool,
    /// Runs that end: the run documents are created before the phase (not measured), each
    /// run's last event is its terminal `status FINISHED`, and then its document is updated
    /// to `finished` (the store's run end, as the bridge writes it), so that a daemon
    /// exporting traces builds and exports every run's spans during the phase (the
    /// `telemetry` workload, and the callgrind count in BENCHMARKS.md).
    pub finish: bool,
}

impl Append {
    pub fn run_id(&self, label: &str, r: usize) -> String {
        if self.scatter {
            let seed = label
                .bytes()
                .fold(r as u64, |h, b| h.wrapping_mul(31) ^ u64::from(b));
            let prefix = gen::Rng::new(seed).next() as u32;
            format!("run-{prefix:08x}-{}-{label}-{r}", self.tag)
        } else {
            format!("run-{}-{label}-{r}", self.tag)
        }
    }

    fn agent_id(&self, label: &str) -> String {
        format!("agent-{}-{label}", self.tag)
    }

    /// The token run `r` is appended with (`None`: the endpoint's).
    fn auth_of(&self, r: usize) -> Option<&HeaderValue> {
        (!self.auth.is_empty()).then(|| &self.auth[r % self.auth.len()])
    }
}

/// The terminal event of a run that ends (see [`Append::finish`]).
const FINISHED: &str = r#"{"type":"status","status":"FINISHED"}"#;

/// The agent and run documents of a phase whose runs end, made before it is timed.
async fn create_runs(target: &Target, agent: &str, run_ids: &[String]) -> anyhow::Result<()> {
    let mut conn = Conn::connect(target.endpoint(0)).await?;
    let now = super::now_ms();
    let doc = gen::AgentState {
        agent_id: agent,
        cwd: "/bench",
        status: "running",
        active_run: None,
        latest_root: None,
        created_at: now,
        updated_at: now,
    };
    let (status, body) = conn.call(doc.call("create").into()).await?;
    anyhow::ensure!(status.is_success(), "agents.create: {status} {body:?}");
    for run_id in run_ids {
        let run = gen::RunState {
            agent_id: agent,
            run_id,
            status: "running",
            request_id: None,
            result: None,
            latest_root: None,
            created_at: now,
            updated_at: now,
            started_at: Some(now),
            ended_at: None,
        };
        let (status, body) = conn.call(run.call("create").into()).await?;
        anyhow::ensure!(status.is_success(), "runs.create: {status} {body:?}");
    }
    Ok(())
}

/// `runs.update` of run `run_id` to `finished`, as the bridge's `markRunTerminal` sends it.
async fn end_run(
    conn: &mut Conn,
    agent: &str,
    run_id: &str,
    auth: Option<&HeaderValue>,
) -> anyhow::Result<()> {
    let now = super::now_ms();
    let run = gen::RunState {
        agent_id: agent,
        run_id,
        status: "finished",
        request_id: None,
        result: Some("done"),
        latest_root: None,
        created_at: now,
        updated_at: now,
        started_at: Some(now),
        ended_at: Some(now),
    };
    let (status, body) = conn.call_as(run.call("update").into(), auth).await?;
    anyhow::ensure!(
        status.is_success(),
        "runs.update of {run_id}: {status} {body:?}"
    );
    Ok(())
}

#[derive(Deserialize)]
struct Answer {
    output: Option<EventDoc>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EventDoc {
    run_id: String,
    seq: u64,
    offset: String,
}

/// One phase: `clients` clients append all R×E events; `label` keeps its runs apart from
/// other phases'. With `verify` false (the null server) answers are not looked at.
pub async fn run(
    target: &Target,
    a: &Arc<Append>,
    label: &str,
    clients: usize,
    verify: bool,
) -> anyhow::Result<Measured> {
    let total = a.runs * a.events;
    let next = Arc::new(AtomicUsize::new(0));
    let run_ids: Arc<Vec<String>> = Arc::new((0..a.runs).map(|r| a.run_id(label, r)).collect());
    let agent = Arc::new(a.agent_id(label));
    if a.finish {
        create_runs(target, &agent, &run_ids).await?;
    }
    let (mut m, per_client) = measure(target, clients, |_, mut conn: Conn| {
        let (a, next, run_ids, agent) = (a.clone(), next.clone(), run_ids.clone(), agent.clone());
        async move {
            let mut rec = Recorder::default();
            let mut seen: Vec<(usize, u64)> = Vec::new();
            // Each call's latency, as a run's first append or a later one.
            let (mut first, mut later) = (Vec::new(), Vec::new());
            loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= total {
                    break;
                }
                let r = k % a.runs;
                let body = if a.finish && k / a.runs == a.events - 1 {
                    gen::status_append(&agent, &run_ids[r], FINISHED)
                } else {
                    a.payloads.append_body(&agent, &run_ids[r], k)
                };
                let last = a.finish && k / a.runs == a.events - 1;
                let answer = rec.call_as(&mut conn, body, a.auth_of(r)).await;
                if let Some(&took) = rec.latencies.last() {
                    if k < a.runs { &mut first } else { &mut later }.push(took);
                }
                if last {
                    // As the bridge does after a run's terminal event: the run document
                    // becomes terminal, which is what ends the run for callbackd (its
                    // trace, counters and approvals). Not among the appends' latencies.
                    if let Err(e) = end_run(&mut conn, &agent, &run_ids[r], a.auth_of(r)).await {
                        rec.wrong(e.to_string());
                    }
                }
                let Some(answer) = answer else {
                    continue;
                };
                if !verify {
                    continue;
                }
                match serde_json::from_slice::<Answer>(&answer) {
                    Ok(Answer { output: Some(ev) }) => {
                        if ev.run_id != run_ids[r] || ev.offset != ev.seq.to_string() {
                            rec.wrong(format!(
                                "append to {} answered runId {} seq {} offset {}",
                                run_ids[r], ev.run_id, ev.seq, ev.offset
                            ));
                        }
                        seen.push((r, ev.seq));
                    }
                    Ok(Answer { output: None }) => rec.wrong("append answered no event".into()),
                    Err(e) => rec.wrong(format!("append answer: {e}")),
                }
            }
            (rec, (seen, first, later))
        }
    })
    .await?;
    let mut seqs = Vec::with_capacity(per_client.len());
    for (seen, first, later) in per_client {
        seqs.push(seen);
        m.first_of_run.extend(first);
        m.later_in_run.extend(later);
    }
    m.first_of_run.sort_unstable();
    m.later_in_run.sort_unstable();
    if verify {
        let mut per_run: Vec<Vec<u64>> = vec![Vec::new(); a.runs];
        for (r, seq) in seqs.into_iter().flatten() {
            per_run[r].push(seq);
        }
        for (r, seqs) in per_run.iter_mut().enumerate() {
            seqs.sort_unstable();
            let expected: Vec<u64> = (1..=a.events as u64).collect();
            if *seqs != expected {
                m.wrong(format!(
                    "run {} got seqs {:?}… (expected 1..={} once each)",
                    run_ids[r],
                    &seqs[..seqs.len().min(8)],
                    a.events
                ));
            }
        }
        read_back(target, a, &run_ids, &mut m).await?;
    }
    Ok(m)
}

/// After the phase, untimed: each run's last event is seq `events` and nothing follows it.
async fn read_back(
    target: &Target,
    a: &Append,
    run_ids: &[String],
    m: &mut Measured,
) -> anyhow::Result<()> {
    let events = a.events as u64;
    let mut conn = Conn::connect(target.ep.clone()).await?;
    let mut rec = Recorder::default();
    for (r, run) in run_ids.iter().enumerate() {
        let body = gen::events_list(run, Some(events.saturating_sub(1)));
        let Some(answer) = rec.call_as(&mut conn, body, a.auth_of(r)).await else {
            continue;
        };
        let ok = super::output(&answer).is_ok_and(|o| {
            o.is_some_and(|o| {
                let items = o["items"].as_array().map_or(0, Vec::len);
                items == 1 && o["items"][0]["seq"] == events && super::no_cursor(&o, "nextOffset")
            })
        });
        if !ok {
            m.wrong(format!("run {run} does not read back with {events} events"));
        }
    }
    if rec.errors > 0 {
        m.wrong(format!("read-back failed: {:?}", rec.examples));
    }
    Ok(())
}
