//! `turn`: simulated bridge turns, each a CreateAgent followed by a first Send, with the call
//! mix of contract §3.1, §3.2 and §5.2: agents.get/update, runs.get/update, 100 event
//! appends, 4 checkpoint blobs of 1–64 KiB plus the root, each written get → create, the
//! checkpoint bookkeeping updates and the final snapshot reads, then the root blob read back
//! as the next turn would (§5.4). 139 calls per turn, one connection per turn, in sequence
//! (the bridge has at most 2 in flight per turn; the clients are the concurrent turns).
//!
//! Checks: a fresh agent misses; every get after a write returns the document written
//! (compared as JSON); appends number 1..100; a blob misses before its create and reads
//! back byte for byte.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::Value;

use super::{measure, output, Measured};
use crate::client::{Conn, Recorder};
use crate::gen::{self, AgentState, Payloads, Rng, RunState};
use crate::target::Target;

pub struct Turns {
    pub tag: String,
    pub payloads: Arc<Payloads>,
    pub blobs: Arc<Vec<String>>,
    pub base_ms: u64,
}

/// Appends streamed between the RUNNING status and the usage event.
const STREAM_EVENTS: usize = 96;
/// Checkpoint blobs besides the root, written during the stream.
const BLOBS: usize = 4;

pub async fn run(
    target: &Target,
    t: &Arc<Turns>,
    label: &str,
    clients: usize,
    turns: usize,
    verify: bool,
) -> anyhow::Result<Measured> {
    let next = Arc::new(AtomicUsize::new(0));
    let label = Arc::new(label.to_string());
    let (m, _) = measure(target, clients, |_, mut conn: Conn| {
        let (t, next, label) = (t.clone(), next.clone(), label.clone());
        async move {
            let mut rec = Recorder::default();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= turns {
                    break;
                }
                let mut turn = Turn {
                    conn: &mut conn,
                    rec: &mut rec,
                    verify,
                    pace: None,
                };
                turn.play(&t, &label, i).await;
            }
            (rec, ())
        }
    })
    .await?;
    Ok(m)
}

/// How a paced turn (the `capacity` workload) spaces its stream, and who follows its run.
pub struct Pace {
    /// The wait between two streamed events, ms, uniform in `lo..=hi`: the model's pace.
    pub gap_ms: (usize, usize),
    /// Called with the run id once the run document exists (the followers open then).
    pub on_run: Box<dyn Fn(&str) + Send + Sync>,
}

pub(crate) struct Turn<'a> {
    pub conn: &'a mut Conn,
    pub rec: &'a mut Recorder,
    pub verify: bool,
    /// `None`: every call back to back (the `turn` workload).
    pub pace: Option<&'a Pace>,
}

impl Turn<'_> {
    /// A call whose answer is not checked beyond its status.
    async fn call(&mut self, body: String) -> Option<Value> {
        let answer = self.rec.call(self.conn, body).await?;
        if !self.verify {
            return None;
        }
        match output(&answer) {
            Ok(o) => o,
            Err(e) => {
                self.rec.wrong(e);
                None
            }
        }
    }

    /// A get whose output must equal `expected` (`None`: unset).
    async fn expect(&mut self, body: String, expected: Option<&str>, what: &str) {
        let got = self.call(body).await;
        if !self.verify {
            return;
        }
        let expected: Option<Value> = expected.map(|e| serde_json::from_str(e).expect("our JSON"));
        if got != expected {
            self.rec
                .wrong(format!("{what}: expected {expected:?}, got {got:?}"));
        }
    }

    async fn append(&mut self, body: String, seq: u64) {
        let got = self.call(body).await;
        if self.verify && got.as_ref().and_then(|o| o["seq"].as_u64()) != Some(seq) {
            self.rec
                .wrong(format!("append expected seq {seq}, got {got:?}"));
        }
    }

    /// get (miss) → create, as the bridge saves a blob (§5.3).
    async fn save_blob(&mut self, agent: &str, blob: &str, data: &str) {
        self.expect(
            gen::checkpoints_get(agent, blob),
            Some(r#"{"found":false}"#),
            "checkpoints.get of a new blob",
        )
        .await;
        self.expect(
            gen::checkpoints_create(agent, blob, data),
            None,
            "checkpoints.create",
        )
        .await;
    }

    pub(crate) async fn play(&mut self, t: &Turns, label: &str, i: usize) {
        let mut rng = Rng::new(0x7475_726e ^ i as u64);
        let agent_id = format!("agent-{}-{label}-{i}", t.tag);
        let run_id = format!("run-{}-{label}-{i}", t.tag);
        let request_id = format!("req-{}-{label}-{i}", t.tag);
        let cwd = format!("/bench/{}/turns", t.tag);
        let t0 = t.base_ms + i as u64 * 1000;
        let mut agent = AgentState {
            agent_id: &agent_id,
            cwd: &cwd,
            status: "idle",
            active_run: None,
            latest_root: None,
            created_at: t0,
            updated_at: t0,
        };
        let mut run = RunState {
            agent_id: &agent_id,
            run_id: &run_id,
            status: "queued",
            request_id: None,
            result: None,
            latest_root: None,
            created_at: t0,
            updated_at: t0,
            started_at: None,
            ended_at: None,
        };
        let a_get = gen::agents_get(&agent_id);
        let r_get = gen::runs_get(&agent_id, &run_id);

        // CreateAgent (§3.1).
        self.expect(a_get.clone(), None, "agents.get of a new agent")
            .await;
        self.call(agent.call("create")).await;
        self.call(run.call("create")).await;
        if let Some(p) = self.pace {
            (p.on_run)(&run_id);
        }
        agent.active_run = Some(&run_id);
        agent.updated_at += 1;
        self.call(agent.call("update")).await;
        self.expect(a_get.clone(), Some(&agent.doc()), "agents.get")
            .await;

        // Send, turn 1 (§3.2 #1–#11, §5.2 step 1).
        for _ in 0..2 {
            self.expect(a_get.clone(), Some(&agent.doc()), "agents.get")
                .await;
            self.expect(r_get.clone(), Some(&run.doc()), "runs.get")
                .await;
        }
        run.status = "running";
        run.request_id = Some(&request_id);
        run.started_at = Some(t0 + 2);
        run.updated_at = t0 + 2;
        self.call(run.call("update")).await;
        self.expect(a_get.clone(), Some(&agent.doc()), "agents.get")
            .await;
        agent.status = "running";
        agent.updated_at = t0 + 3;
        self.call(agent.call("update")).await;
        let request = format!(
            r#"{{"type":"request","agent_id":"{agent_id}","run_id":"{run_id}","request_id":"{request_id}"}}"#
        );
        self.append(gen::status_append(&agent_id, &run_id, &request), 1)
            .await;
        self.append(
            gen::status_append(
                &agent_id,
                &run_id,
                r#"{"type":"status","status":"RUNNING"}"#,
            ),
            2,
        )
        .await;
        for _ in 0..2 {
            self.expect(a_get.clone(), Some(&agent.doc()), "agents.get")
                .await;
        }

        // The stream: events, with the turn's blobs saved in between (§5.2 steps 2–3).
        let blob_ids: Vec<String> = (0..=BLOBS).map(|_| rng.hex64()).collect();
        let data: Vec<&String> = (0..=BLOBS)
            .map(|_| &t.blobs[rng.range(0, t.blobs.len() - 1)])
            .collect();
        let mut seq = 2;
        for e in 0..STREAM_EVENTS {
            seq += 1;
            let body = t.payloads.append_body(&agent_id, &run_id, i * 131 + e);
            self.append(body, seq).await;
            if let Some(p) = self.pace {
                let ms = rng.range(p.gap_ms.0, p.gap_ms.1);
                tokio::time::sleep(std::time::Duration::from_millis(ms as u64)).await;
            }
            if e % (STREAM_EVENTS / BLOBS) == STREAM_EVENTS / BLOBS - 4 {
                let b = e / (STREAM_EVENTS / BLOBS);
                self.save_blob(&agent_id, &blob_ids[b], data[b]).await;
            }
        }
        seq += 1;
        let usage = r#"{"type":"usage","usage":{"inputTokens":1204,"outputTokens":311,"cacheReadTokens":0,"cacheWriteTokens":0,"totalTokens":1515}}"#;
        self.append(gen::status_append(&agent_id, &run_id, usage), seq)
            .await;

        // The root blob and the checkpoint bookkeeping (§5.2 steps 4–5).
        let root = &blob_ids[BLOBS];
        self.save_blob(&agent_id, root, data[BLOBS]).await;
        self.expect(a_get.clone(), Some(&agent.doc()), "agents.get")
            .await;
        agent.latest_root = Some(root);
        agent.updated_at = t0 + 4;
        self.call(agent.call("update")).await;
        self.expect(a_get.clone(), Some(&agent.doc()), "agents.get")
            .await;
        self.expect(r_get.clone(), Some(&run.doc()), "runs.get")
            .await;
        run.latest_root = Some(root);
        run.updated_at = t0 + 5;
        self.call(run.call("update")).await;
        self.expect(a_get.clone(), Some(&agent.doc()), "agents.get")
            .await;
        agent.updated_at = t0 + 6;
        self.call(agent.call("update")).await;

        // Finish (§5.2 step 6).
        seq += 1;
        self.append(
            gen::status_append(
                &agent_id,
                &run_id,
                r#"{"type":"status","status":"FINISHED"}"#,
            ),
            seq,
        )
        .await;
        self.expect(a_get.clone(), Some(&agent.doc()), "agents.get")
            .await;
        self.expect(r_get.clone(), Some(&run.doc()), "runs.get")
            .await;
        run.status = "finished";
        run.result = Some("Done: the tool echoed ping.");
        run.ended_at = Some(t0 + 7);
        run.updated_at = t0 + 7;
        self.call(run.call("update")).await;
        self.expect(a_get.clone(), Some(&agent.doc()), "agents.get")
            .await;
        agent.status = "idle";
        agent.active_run = None;
        agent.updated_at = t0 + 8;
        self.call(agent.call("update")).await;
        self.expect(a_get.clone(), Some(&agent.doc()), "final agents.get")
            .await;
        self.expect(r_get, Some(&run.doc()), "final runs.get").await;

        // The next turn loads the root first (§5.4).
        let found = format!(r#"{{"found":true,"data":"{}"}}"#, data[BLOBS]);
        self.expect(
            gen::checkpoints_get(&agent_id, root),
            Some(&found),
            "checkpoints.get of the root blob",
        )
        .await;
    }
}

/// Calls per turn, for the report.
pub const CALLS_PER_TURN: usize = 139;
