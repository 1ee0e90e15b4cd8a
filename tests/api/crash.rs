//! Durability: SIGKILL the real daemon binary while clients append, restart it on the same
//! database, and find every acknowledged event, with gap-free seqs.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::Mutex;

/// The daemon as a child process.
struct Daemon {
    child: Child,
    url: String,
}

fn start(db: &std::path::Path) -> Daemon {
    let mut child = Command::new(env!("CARGO_BIN_EXE_callbackd"))
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(db)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_appends_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crash.db");
    // run id -> (payload index -> acknowledged seq)
    let acked: Arc<Mutex<BTreeMap<String, BTreeMap<u64, u64>>>> = Arc::default();
    let rounds = 3;
    for round in 0..rounds {
        let mut daemon = start(&db);
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
        tokio::time::sleep(Duration::from_millis(400)).await;
        daemon.child.kill().unwrap(); // SIGKILL
        daemon.child.wait().unwrap();
        for w in writers {
            w.await.unwrap();
        }
    }

    let daemon = start(&db);
    let acked = acked.lock().await;
    assert!(
        acked.values().map(BTreeMap::len).sum::<usize>() > 50,
        "the test appended something"
    );
    for (run, events) in acked.iter() {
        let mut stored: BTreeMap<u64, u64> = BTreeMap::new();
        let conn = rusqlite::Connection::open(&db).unwrap();
        let mut stmt = conn
            .prepare("SELECT seq, json_extract(payload, '$.i') FROM run_events WHERE run_id = ?1 ORDER BY seq")
            .unwrap();
        for row in stmt
            .query_map([run], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
            .unwrap()
        {
            let (seq, i) = row.unwrap();
            stored.insert(i as u64, seq as u64);
        }
        let seqs: Vec<u64> = stored.values().copied().collect();
        assert_eq!(
            seqs,
            (1..=seqs.len() as u64).collect::<Vec<_>>(),
            "{run}: seqs are gap-free"
        );
        for (i, seq) in events {
            assert_eq!(
                stored.get(i),
                Some(seq),
                "{run}: acknowledged event {i} (seq {seq}) is stored"
            );
        }
        let ok: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok");
    }
    drop(daemon);
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
