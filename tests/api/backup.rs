//! `callbackd backup` of a live database under append load: appends go on while the copy is
//! made, and the copy passes `callbackd check` with every event it holds numbered 1..k.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::json;

use crate::helpers::TestApp;

const BIN: &str = env!("CARGO_BIN_EXE_callbackd");

fn callbackd(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .env_remove("CALLBACKD_CONFIG")
        .output()
        .expect("run callbackd")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_of_a_live_database_under_appends_passes_check() {
    let app = Arc::new(TestApp::spawn_sqlite().await);
    // ~24 MiB of checkpoint blobs, so that the copy takes a while.
    let mut blob = vec![0u8; 1 << 20];
    for i in 0..24u32 {
        getrandom::fill(&mut blob).unwrap();
        let data = base64::engine::general_purpose::STANDARD.encode(&blob);
        app.store_ok(
            "checkpoints",
            "create",
            json!({"agentId": "a", "blobId": format!("b{i}"), "data": data}),
        )
        .await;
    }

    // Appends, as fast as one client goes, until told to stop; each acknowledgement timed.
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Arc<Mutex<Vec<(Instant, u64)>>> = Arc::default();
    let load = {
        let (app, stop, acked) = (app.clone(), stop.clone(), acked.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let out = app
                    .store_ok(
                        "runEvents",
                        "append",
                        json!({"runId": "load", "eventType": "e", "payload": {"pad": "x".repeat(500)}}),
                    )
                    .await
                    .expect("an event");
                let seq = out["seq"].as_u64().unwrap();
                acked.lock().unwrap().push((Instant::now(), seq));
            }
        })
    };
    while acked.lock().unwrap().len() < 20 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    let dest = app.dir.path().join("copy.db");
    let (db, dest2) = (app.db.clone(), dest.clone());
    let (started, output, ended) = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let out = callbackd(&[
            "backup".as_ref(),
            "--db".as_ref(),
            db.as_os_str(),
            dest2.as_os_str(),
        ]);
        (started, out, Instant::now())
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    stop.store(true, Ordering::Relaxed);
    load.await.unwrap();

    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "backup failed: {stderr}");
    assert!(stderr.contains("quick_check ok"), "{stderr}");
    let acked = acked.lock().unwrap().clone();
    let before = acked.iter().filter(|(t, _)| *t < started).count() as i64;
    let during = acked
        .iter()
        .filter(|(t, _)| *t >= started && *t <= ended)
        .count();
    eprintln!(
        "backup took {:?}; {before} appends before it, {during} while it ran",
        ended - started
    );
    assert!(
        during >= 5,
        "appends should go on during the backup ({:?}): {during} acknowledged while it ran",
        ended - started
    );

    let check = callbackd(&["check".as_ref(), "--db".as_ref(), dest.as_os_str()]);
    assert!(
        check.status.success(),
        "the copy fails check: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(String::from_utf8_lossy(&check.stdout).contains("24 checked, 0 corrupt"));
    let copy = rusqlite::Connection::open(&dest).unwrap();
    let (n, max): (i64, i64) = copy
        .query_row(
            "SELECT COUNT(*), MAX(seq) FROM run_events WHERE run_id = 'load'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        n, max,
        "the copy's events are numbered 1..{max} without holes"
    );
    assert!(
        n >= before,
        "every append acknowledged before the backup is in it"
    );
    assert!(n <= acked.len() as i64);

    // A second backup to the same path is refused, unless forced.
    let again = callbackd(&[
        "backup".as_ref(),
        "--db".as_ref(),
        app.db.as_os_str(),
        dest.as_os_str(),
    ]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists; pass --force"));
    let forced = callbackd(&[
        "backup".as_ref(),
        "--force".as_ref(),
        "--db".as_ref(),
        app.db.as_os_str(),
        dest.as_os_str(),
    ]);
    assert!(
        forced.status.success(),
        "{}",
        String::from_utf8_lossy(&forced.stderr)
    );
}
