//! Durability: SIGKILL the real daemon binary at random moments while clients append,
//! restart it on the same database, and find every acknowledged event, with gap-free seqs
//! and an intact file, after every restart.
//!
//! `CALLBACKD_CRASH_ROUNDS` sets the number of kills (default 3; `scripts/crash-test` runs
//! 20). Every third round, starting with the second, runs with `store.sync = "full"`, the
//! others with the default `"normal"`. The kill moments come from `CALLBACKD_CRASH_SEED`
//! (default: the clock), printed so a failing run can be replayed.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::Mutex;

use crate::helpers::{backend, Backend, PgTarget};

/// The daemon as a child process.
struct Daemon {
    child: Child,
    url: String,
}

fn start(db: &std::path::Path, sync: &str, pg: Option<&PgTarget>) -> Daemon {
    let config = db.with_extension("toml");
    let mut toml = format!("[store]\nsync = \"{sync}\"\n");
    if let Some(pg) = pg {
        // The same kills, on PostgreSQL: what the daemon acknowledged was committed there.
        toml.push_str(&format!(
            "backend = \"postgres\"\nurl = \"{}\"\nschema = \"{}\"\n",
            pg.url, pg.schema
        ));
    }
    std::fs::write(&config, toml).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_callbackd"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .args(pg.is_none().then_some("--db"))
        .args(pg.is_none().then_some(db))
        .env("CALLBACKD_STORE_TOKEN", "crash-store-token")
        .env("CALLBACKD_TOOL_TOKEN", "crash-tool-token")
        .env("CALLBACKD_LOG", "warn")
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn callbackd");
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("callbackd exited before ready")
            .unwrap();
        if let Some(json) = line.strip_prefix("callbackd ready ") {
            let v: Value = serde_json::from_str(json).unwrap();
            break v["url"].as_str().unwrap().to_string();
        }
    };
    // Keep draining stderr so the daemon never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Daemon { child, url }
}

/// One append over a fresh connection; `Some(seq)` only when acknowledged.
async fn append(url: &str, run: &str, i: u64) -> Option<u64> {
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let body = json!({"substore": "runEvents", "method": "append",
                      "input": {"runId": run, "eventType": "e", "payload": {"i": i, "pad": "x".repeat(500)}}})
        .to_string();
    let req = format!(
        "POST /sdk.v1.SdkStoreCallbackService/CallStore HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         authorization: Bearer crash-store-token\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let answer = tokio::time::timeout(Duration::from_secs(5), async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut sock = tokio::net::TcpStream::connect(&addr).await.ok()?;
        sock.write_all(req.as_bytes()).await.ok()?;
        let mut buf = Vec::new();
        sock.read_to_end(&mut buf).await.ok()?;
        Some(String::from_utf8_lossy(&buf).into_owned())
    })
    .await
    .ok()??;
    if !answer.starts_with("HTTP/1.1 200") {
        return None;
    }
    let body = answer.split("\r\n\r\n").nth(1)?;
    let v: Value = serde_json::from_str(body).ok()?;
    v["output"]["seq"].as_u64()
}

/// A small xorshift generator: random kill moments without a dependency.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

pub(crate) fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Run id -> (payload index -> acknowledged seq).
type Acked = BTreeMap<String, BTreeMap<u64, u64>>;

/// `(seq, payload.i)` of a run's events, in seq order.
async fn stored(db: &std::path::Path, pg: Option<&PgTarget>, run: &str) -> Vec<(u64, u64)> {
    if let Some(pg) = pg {
        return pg
            .connect()
            .await
            .query(
                "SELECT seq, (payload::json->>'i')::int8 FROM run_events WHERE run_id = $1 ORDER BY seq",
                &[&run],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get::<_, i64>(0) as u64, r.get::<_, i64>(1) as u64))
            .collect();
    }
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT seq, json_extract(payload, '$.i') FROM run_events WHERE run_id = ?1 ORDER BY seq")
        .unwrap();
    let rows = stmt
        .query_map([run], |r| {
            Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    rows
}

/// Every acknowledged append is stored at its seq, each payload once, seqs gap-free per
/// run, and (SQLite) `PRAGMA integrity_check` is ok.
pub async fn verify(db: &std::path::Path, pg: Option<&PgTarget>, acked: &Acked, when: &str) {
    if pg.is_none() {
        let conn = rusqlite::Connection::open(db).unwrap();
        let ok: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok", "{when}: integrity_check");
    }
    for (run, events) in acked {
        let rows = stored(db, pg, run).await;
        let seqs: Vec<u64> = rows.iter().map(|(seq, _)| *seq).collect();
        assert_eq!(
            seqs,
            (1..=seqs.len() as u64).collect::<Vec<_>>(),
            "{when}: {run}: seqs are gap-free"
        );
        let stored: BTreeMap<u64, u64> = rows.iter().map(|(seq, i)| (*i, *seq)).collect();
        assert_eq!(
            stored.len(),
            rows.len(),
            "{when}: {run}: no event stored twice"
        );
        for (i, seq) in events {
            assert_eq!(
                stored.get(i),
                Some(seq),
                "{when}: {run}: acknowledged event {i} (seq {seq}) is stored"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_appends_survive_sigkill() {
    let rounds = env_u64("CALLBACKD_CRASH_ROUNDS").unwrap_or(3);
    let seed = env_u64("CALLBACKD_CRASH_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    eprintln!("crash test: {rounds} rounds, CALLBACKD_CRASH_SEED={seed}");
    let mut rng = Rng(seed | 1);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crash.db");
    let pg = (backend() == Backend::Postgres).then(|| PgTarget::for_dir(dir.path()));
    let pg = pg.as_ref();
    let acked: Arc<Mutex<Acked>> = Arc::default();
    let mut full_rounds = 0;
    for round in 0..rounds {
        let sync = if round % 3 == 1 { "full" } else { "normal" };
        full_rounds += u64::from(sync == "full");
        let mut daemon = start(&db, sync, pg);
        if round > 0 {
            verify(
                &db,
                pg,
                &*acked.lock().await,
                &format!("after kill {round}"),
            )
            .await;
        }
        let url = daemon.url.clone();
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let url = url.clone();
                let acked = acked.clone();
                tokio::spawn(async move {
                    let run = format!("run-{w}");
                    for i in 0.. {
                        let i = round * 1_000_000 + i;
                        match append(&url, &run, i).await {
                            Some(seq) => {
                                acked
                                    .lock()
                                    .await
                                    .entry(run.clone())
                                    .or_default()
                                    .insert(i, seq);
                            }
                            None => break,
                        }
                    }
                })
            })
            .collect();
        // Anywhere from the first appends to well into the stream.
        let kill_after = 100 + rng.below(500);
        tokio::time::sleep(Duration::from_millis(kill_after)).await;
        daemon.child.kill().unwrap(); // SIGKILL
        daemon.child.wait().unwrap();
        for w in writers {
            w.await.unwrap();
        }
    }

    let daemon = start(&db, "normal", pg);
    let acked = acked.lock().await;
    let total = acked.values().map(BTreeMap::len).sum::<usize>();
    eprintln!("crash test: {total} acknowledged appends over {rounds} kills ({full_rounds} with sync = full)");
    assert!(total > 20, "the test appended something");
    verify(&db, pg, &acked, "at the end").await;
    drop(daemon);
    if let Some(pg) = pg {
        pg.drop_schema();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
