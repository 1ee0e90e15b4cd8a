//! Request bodies: deterministic pseudo-random payloads, documents and blobs shaped like the
//! bridge's (contract §2.2, §5.2, §5.3).

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

/// xorshift64*: reproducible figures without a `rand` dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }

    /// 64 lowercase hex digits, like a blob id (the hex sha256 of the blob).
    pub fn hex64(&mut self) -> String {
        format!(
            "{:016x}{:016x}{:016x}{:016x}",
            self.next(),
            self.next(),
            self.next(),
            self.next()
        )
    }
}

/// Prose-like ASCII text of exactly `len` bytes, needing no JSON escaping.
pub fn text(rng: &mut Rng, len: usize) -> String {
    const WORDS: &[&str] = &[
        "the",
        "agent",
        "reads",
        "file",
        "src",
        "main",
        "and",
        "then",
        "calls",
        "tool",
        "with",
        "args",
        "result",
        "store",
        "event",
        "run",
        "turn",
        "checkpoint",
        "blob",
        "update",
    ];
    let mut s = String::with_capacity(len + 16);
    while s.len() < len {
        s.push_str(WORDS[rng.range(0, WORDS.len() - 1)]);
        s.push(' ');
    }
    s.truncate(len);
    s
}

/// A pool of event payloads (0.5–3 KB of JSON for `append`), in the envelope the SDK writes
/// (`{"schemaVersion":1,"type":"sdk_message",...,"message":{...}}`). `{AGENT}` and `{RUN}`
/// are filled in per request.
pub struct Payloads {
    /// (before the agent id, between agent and run id, after the run id)
    parts: Vec<(String, String, String)>,
}

impl Payloads {
    /// `n` payloads whose JSON is `bytes.0..=bytes.1` long (the envelope and ids take
    /// ~190 bytes, a tool call's fixed part ~200 more: below ~400 bytes they come out
    /// somewhat longer).
    pub fn new(seed: u64, n: usize, bytes: (usize, usize)) -> Payloads {
        let mut rng = Rng::new(seed);
        let parts = (0..n)
            .map(|i| {
                let len = rng.range(bytes.0, bytes.1).saturating_sub(190);
                let message = match i % 4 {
                    0 | 1 => format!(
                        r#"{{"type":"assistant","message":{{"role":"assistant","content":[{{"type":"text","text":"{}"}}]}}}}"#,
                        text(&mut rng, len)
                    ),
                    2 => format!(
                        r#"{{"type":"tool_call","call_id":"toolu_{i}","name":"mcp","status":"completed","args":{{"providerIdentifier":"custom-user-tools","toolName":"echo","args":{{"text":"ping"}}}},"result":{{"status":"success","value":{{"content":[{{"text":{{"text":"{}"}}}}],"isError":false}}}}}}"#,
                        text(&mut rng, len.saturating_sub(200))
                    ),
                    _ => format!(
                        r#"{{"type":"thinking","text":"{}"}}"#,
                        text(&mut rng, len)
                    ),
                };
                (
                    r#"{"schemaVersion":1,"type":"sdk_message","agentId":""#.to_string(),
                    r#"","runId":""#.to_string(),
                    format!(r#"","message":{message}}}"#),
                )
            })
            .collect();
        Payloads { parts }
    }

    /// The event payload (JSON) that [`Payloads::append_body`] carries for payload `k`.
    pub fn payload(&self, agent: &str, run: &str, k: usize) -> String {
        let (a, b, c) = &self.parts[k % self.parts.len()];
        [a.as_str(), agent, b, run, c].concat()
    }

    /// The `runEvents.append` request body with payload `k` of the pool.
    pub fn append_body(&self, agent: &str, run: &str, k: usize) -> String {
        let (a, b, c) = &self.parts[k % self.parts.len()];
        let mut s = String::with_capacity(a.len() + b.len() + c.len() + 160);
        s.push_str(r#"{"substore":"runEvents","method":"append","input":{"runId":""#);
        s.push_str(run);
        s.push_str(r#"","eventType":"run_stream_event","payload":"#);
        s.push_str(a);
        s.push_str(agent);
        s.push_str(b);
        s.push_str(run);
        s.push_str(c);
        s.push_str("}}");
        s
    }
}

/// A small status event (`request`, `status`, `usage`), as appended around a turn.
pub fn status_append(agent: &str, run: &str, message: &str) -> String {
    format!(
        r#"{{"substore":"runEvents","method":"append","input":{{"runId":"{run}","eventType":"run_stream_event","payload":{{"schemaVersion":1,"type":"sdk_message","agentId":"{agent}","runId":"{run}","message":{message}}}}}}}"#
    )
}

/// An agent document as the bridge writes it.
pub struct AgentState<'a> {
    pub agent_id: &'a str,
    pub cwd: &'a str,
    pub status: &'a str,
    pub active_run: Option<&'a str>,
    pub latest_root: Option<&'a str>,
    pub created_at: u64,
    pub updated_at: u64,
}

impl AgentState<'_> {
    pub fn doc(&self) -> String {
        let active = self
            .active_run
            .map_or_else(|| "null".to_string(), |r| format!("\"{r}\""));
        let latest = match self.latest_root {
            None => String::new(),
            Some(root) => {
                format!(r#","latestCheckpoint":{{"schemaVersion":1,"rootBlobId":"{root}"}}"#)
            }
        };
        format!(
            r#"{{"agentId":"{}","cwd":"{}","status":"{}","activeRunId":{active},"name":"New Agent","createdAt":{},"updatedAt":{}{latest},"sdkMetadata":{{"blobEncryptionKey":"5f3c0b1e9a7d4c2b8e6f1a3d5c7b9e0f2a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b"}}}}"#,
            self.agent_id, self.cwd, self.status, self.created_at, self.updated_at
        )
    }

    pub fn call(&self, method: &str) -> String {
        format!(
            r#"{{"substore":"agents","method":"{method}","input":{{"agent":{}}}}}"#,
            self.doc()
        )
    }
}

/// A run document, every key explicit as the bridge sends it.
pub struct RunState<'a> {
    pub agent_id: &'a str,
    pub run_id: &'a str,
    pub status: &'a str,
    pub request_id: Option<&'a str>,
    pub result: Option<&'a str>,
    pub latest_root: Option<&'a str>,
    pub created_at: u64,
    pub updated_at: u64,
    pub started_at: Option<u64>,
    pub ended_at: Option<u64>,
}

impl RunState<'_> {
    pub fn doc(&self) -> String {
        let s = |v: Option<&str>| v.map_or_else(|| "null".to_string(), |v| format!("\"{v}\""));
        let n = |v: Option<u64>| v.map_or_else(|| "null".to_string(), |v| v.to_string());
        let r = |v: Option<&str>| {
            v.map_or_else(
                || "null".to_string(),
                |v| format!(r#"{{"schemaVersion":1,"rootBlobId":"{v}"}}"#),
            )
        };
        let usage = if self.status == "finished" {
            r#"{"inputTokens":1204,"outputTokens":311,"cacheReadTokens":0,"cacheWriteTokens":0,"totalTokens":1515}"#
        } else {
            "null"
        };
        format!(
            r#"{{"runId":"{}","requestId":{},"agentId":"{}","turnNumber":1,"status":"{}","model":{{"id":"composer-1"}},"result":{},"error":null,"usageRef":null,"usage":{usage},"createdAt":{},"updatedAt":{},"startedAt":{},"endedAt":{},"startCheckpointRef":null,"latestCheckpointRef":{}}}"#,
            self.run_id,
            s(self.request_id),
            self.agent_id,
            self.status,
            s(self.result),
            self.created_at,
            self.updated_at,
            n(self.started_at),
            n(self.ended_at),
            r(self.latest_root),
        )
    }

    pub fn call(&self, method: &str) -> String {
        format!(
            r#"{{"substore":"runs","method":"{method}","input":{{"run":{}}}}}"#,
            self.doc()
        )
    }
}

pub fn agents_get(agent: &str) -> String {
    format!(r#"{{"substore":"agents","method":"get","input":{{"agentId":"{agent}"}}}}"#)
}

pub fn runs_get(agent: &str, run: &str) -> String {
    format!(
        r#"{{"substore":"runs","method":"get","input":{{"agentId":"{agent}","runId":"{run}"}}}}"#
    )
}

pub fn checkpoints_get(agent: &str, blob: &str) -> String {
    format!(
        r#"{{"substore":"checkpoints","method":"get","input":{{"agentId":"{agent}","blobId":"{blob}"}}}}"#
    )
}

pub fn checkpoints_create(agent: &str, blob: &str, data_b64: &str) -> String {
    format!(
        r#"{{"substore":"checkpoints","method":"create","input":{{"agentId":"{agent}","blobId":"{blob}","data":"{data_b64}"}}}}"#
    )
}

pub fn events_list(run: &str, after: Option<u64>) -> String {
    match after {
        None => {
            format!(r#"{{"substore":"runEvents","method":"list","input":{{"runId":"{run}"}}}}"#)
        }
        Some(a) => format!(
            r#"{{"substore":"runEvents","method":"list","input":{{"runId":"{run}","afterOffset":"{a}"}}}}"#
        ),
    }
}

pub fn agents_list(cwd: &str, cursor: Option<&str>) -> String {
    match cursor {
        None => format!(
            r#"{{"substore":"agents","method":"list","input":{{"filter":{{"cwd":"{cwd}"}}}}}}"#
        ),
        Some(c) => format!(
            r#"{{"substore":"agents","method":"list","input":{{"filter":{{"cwd":"{cwd}","cursor":"{c}"}}}}}}"#
        ),
    }
}

/// Checkpoint blobs of 1–64 KiB (log-uniform sizes), already base64-encoded.
pub fn blobs(seed: u64, n: usize) -> Vec<String> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| {
            // 2^10 .. 2^16 bytes, log-uniform.
            let exp = 10.0 + (rng.next() % 6001) as f64 / 1000.0;
            let len = 2f64.powf(exp) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            STANDARD.encode(bytes)
        })
        .collect()
}
