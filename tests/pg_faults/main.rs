//! PostgreSQL faults that take the whole server down, in a test binary of their own so
//! that no other test runs while the server restarts. Runs when the suite runs on
//! PostgreSQL (`CALLBACKD_TEST_BACKEND=postgres`) with the cluster's directory in
//! `CALLBACKD_TEST_PG_DIR` (scripts/test sets both); returns at once otherwise.

#[path = "../api/helpers.rs"]
mod helpers;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use callbackd::StoreNotice;
use serde_json::json;

use helpers::{backend, Backend, PgTarget, TestApp};

async fn daemon_on(pg: &PgTarget) -> TestApp {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pg-schema"), &pg.schema).unwrap();
    TestApp::spawn_in(dir, |_| {}).await
}

/// The tests here take the server down: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn target() -> Option<PgTarget> {
    if backend() != Backend::Postgres {
        eprintln!("not a PostgreSQL run: nothing to test");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    Some(PgTarget::for_dir(dir.path()))
}

/// The server is restarted (`scripts/pg-cluster restart`) while four clients append: calls
/// in flight answer `unavailable` (never `internal`), the pool reconnects by itself, and
/// every acknowledged event is stored at its seq. Needs the cluster's directory
/// (`CALLBACKD_TEST_PG_DIR`, set by scripts/test).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_restart_under_load_loses_no_acknowledged_append() {
    let _serial = SERIAL.lock().await;
    let Some(pg) = target() else { return };
    let Ok(cluster) = std::env::var("CALLBACKD_TEST_PG_DIR") else {
        // Against a server the tests did not start they cannot restart it.
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs this test: set CALLBACKD_TEST_PG_DIR"
        );
        eprintln!("CALLBACKD_TEST_PG_DIR unset: not restarting a server the tests do not own");
        return;
    };
    let app = Arc::new(daemon_on(&pg).await);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (app, stop) = (app.clone(), stop.clone());
            tokio::spawn(async move {
                let run = format!("run-{w}");
                let (mut acked, mut failures) = (BTreeMap::new(), Vec::new());
                let mut i = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let resp = app
                        .call_store(
                            "runEvents",
                            "append",
                            json!({"runId": run, "eventType": "e", "payload": {"i": i}}),
                        )
                        .await;
                    if resp.status == 200 {
                        acked.insert(i, resp.json()["output"]["seq"].as_u64().unwrap());
                    } else {
                        failures.push(resp.code());
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    i += 1;
                }
                (run, acked, failures)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/pg-cluster");
    let restarted = tokio::process::Command::new(script)
        .args(["restart", &cluster])
        .status()
        .await
        .unwrap();
    assert!(restarted.success(), "pg-cluster restart");
    let after = Instant::now();
    // The pool must reconnect without help: appends succeed again soon after.
    loop {
        let resp = app
            .call_store(
                "runEvents",
                "append",
                json!({"runId": "probe", "eventType": "e"}),
            )
            .await;
        if resp.status == 200 {
            break;
        }
        assert!(
            after.elapsed() < Duration::from_secs(10),
            "no reconnect: {}",
            resp.text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut total = 0;
    let mut failed = 0;
    for w in writers {
        let (run, acked, failures) = w.await.unwrap();
        failed += failures.len();
        for code in &failures {
            assert_eq!(
                code, "unavailable",
                "{run}: a failed append during the restart"
            );
        }
        let page = app
            .store_ok("runEvents", "list", json!({"runId": run, "limit": 1000}))
            .await
            .unwrap();
        let stored: BTreeMap<u64, u64> = page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["payload"]["i"].as_u64().unwrap(),
                    e["seq"].as_u64().unwrap(),
                )
            })
            .collect();
        let seqs: Vec<u64> = stored
            .values()
            .copied()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        assert_eq!(
            seqs,
            (1..=seqs.len() as u64).collect::<Vec<_>>(),
            "{run}: gap-free"
        );
        for (i, seq) in &acked {
            assert_eq!(
                stored.get(i),
                Some(seq),
                "{run}: acknowledged event {i} is stored"
            );
        }
        total += acked.len();
    }
    eprintln!("restart test: {total} acknowledged appends, {failed} answered unavailable");
    assert!(total > 20, "the test appended something");
    // The restart happened under load: some calls were in flight or arrived while the server
    // was down, and each of those answered `unavailable` (checked above).
    assert!(
        failed > 0,
        "no append failed: the restart was not under load"
    );
    drop(app);
    pg.drop_schema();
}

/// The listening connection is killed: followers get `Resync`, and once it is back they
/// hear other daemons' appends again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_listener_reconnects_and_tells_followers_to_re_read() {
    let _serial = SERIAL.lock().await;
    let Some(pg) = target() else { return };
    let a = daemon_on(&pg).await;
    let b = daemon_on(&pg).await;
    let mut rx = b.store.subscribe();
    let admin = pg.connect().await;
    let killed: i64 = admin
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name LIKE 'callbackd listener %'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(killed >= 2, "both daemons' listeners: {killed}");
    let heard = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("a notice")
        .unwrap();
    assert_eq!(heard, StoreNotice::Resync);
    // Give A's listener the same chance, then check B hears A again.
    tokio::time::sleep(Duration::from_millis(200)).await;
    a.store_ok(
        "runEvents",
        "append",
        json!({"runId": "r", "eventType": "e"}),
    )
    .await;
    loop {
        let n = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("B hears A after the reconnect")
            .unwrap();
        if let StoreNotice::Remote(n) = n {
            assert_eq!((n.run_id.as_str(), n.seq), ("r", 1));
            break;
        }
    }
    drop((a, b));
    pg.drop_schema();
}
