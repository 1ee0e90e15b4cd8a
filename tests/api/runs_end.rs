//! Issue 34: a run no bridge can finish is ended by callbackd, and its session works again.
//! Here the cancel of a run whose bridge is gone (no bridge attached: the one that ran it
//! stopped): callbackd ends it `cancelled` itself, every stream of it ends with a terminal
//! event, its held call is cancelled and its tool never runs, and the session can be
//! deleted. The supervised bridge's runs (`callbackd run`) are in `approvals_bound.rs`'s
//! supervised tests and the end-to-end suite.
//!
//! Runs on SQLite, and on PostgreSQL with `CALLBACKD_TEST_BACKEND=postgres`.

use std::time::Duration;

use serde_json::json;

use crate::approvals_bound::{call, decide, first_pending, marker_tool};
use crate::helpers::TestApp;
use crate::run_api::{append, tool_turn};

const T: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_cancel_no_bridge_can_take_ends_the_run_itself_and_the_session_works_again() {
    let marker_dir = tempfile::tempdir().unwrap();
    let marker = marker_dir.path().join("ran.json");
    let tool = marker_tool(&marker, "");
    let app = std::sync::Arc::new(TestApp::spawn_with(move |c| c.tools.command.push(tool)).await);
    app.running_run_r1().await;
    let turn = tool_turn();
    append(&app, "r1", turn[0].clone()).await;
    append(&app, "r1", turn[1].clone()).await;
    // A live reader, opened before the end.
    let mut live = app.stream("r1", None).await;
    assert_eq!(live.next(T).await.unwrap().kind(), "run_started");
    let held = call(&app, "prod");
    let card = first_pending(&app).await;
    let token = app.api_token.clone();

    let r = app
        .api("POST", "/v1/runs/r1/cancel", Some(&token), "")
        .await;
    assert_eq!(r.status, 202, "{}", r.text());
    assert_eq!(r.json()["status"], "cancelled", "{}", r.text());

    // The held call got its answer, and its tool never ran.
    let result = tokio::time::timeout(T, held).await.unwrap().unwrap();
    assert!(result.to_string().contains("cancelled"), "{result}");
    assert!(!marker.exists(), "the tool of a cancelled run ran");
    let id = card["id"].as_str().unwrap();
    let one = app.api_get(&format!("/v1/approvals/{id}")).await.json();
    assert_eq!(one["state"], "cancelled", "{one}");
    let late = decide(&app, id, json!({"decision": "approve"})).await;
    assert_eq!(late.status, 409, "{}", late.text());

    // Every stream ends with the terminal event: the live one and a replay.
    let rest = live.collect(T).await;
    let last = rest.last().unwrap();
    assert_eq!(last.kind(), "completed", "{rest:?}");
    assert_eq!(last.data().unwrap()["status"], "cancelled", "{rest:?}");
    let replay = app.stream("r1", None).await.collect(T).await;
    assert_eq!(replay.last().unwrap().kind(), "completed", "{replay:?}");

    let run = app.api_get("/v1/runs/r1").await.json();
    assert_eq!(run["status"], "cancelled", "{run}");
    assert!(!run["ended_at"].is_null(), "{run}");
    // Ended once: a second cancel is refused, and the run has one terminal event.
    let again = app
        .api("POST", "/v1/runs/r1/cancel", Some(&token), "")
        .await;
    assert_eq!(again.status, 409, "{}", again.text());
    let ends = app
        .count("SELECT count(*) FROM run_events WHERE run_id = 'r1' AND payload LIKE '%CANCELLED%'")
        .await;
    assert_eq!(ends, 1);
    // The session is free: no active run, and it can be deleted.
    let session = app.api_get("/v1/sessions/a1").await.json();
    assert!(session["active_run_id"].is_null(), "{session}");
    let del = app.api("DELETE", "/v1/sessions/a1", Some(&token), "").await;
    assert_eq!(del.status, 204, "{}", del.text());
}

#[tokio::test]
async fn a_cancel_racing_the_runs_own_end_records_the_first_end_only() {
    let app = TestApp::spawn().await;
    app.running_run_r1().await;
    let turn = tool_turn();
    append(&app, "r1", turn[0].clone()).await;
    // The bridge stored its end and died before it updated the document.
    append(&app, "r1", json!({"type": "status", "status": "FINISHED"})).await;
    let token = app.api_token.clone();
    let r = app
        .api("POST", "/v1/runs/r1/cancel", Some(&token), "")
        .await;
    assert_eq!(r.status, 409, "{}", r.text());
    assert!(r.text().contains("finished"), "{}", r.text());
    let run = app.api_get("/v1/runs/r1").await.json();
    assert_eq!(run["status"], "finished", "{run}");
    let ends = app
        .count("SELECT count(*) FROM run_events WHERE run_id = 'r1' AND payload LIKE '%CANCELLED%'")
        .await;
    assert_eq!(ends, 0);
}

/// Two daemons on one store (PostgreSQL, or one SQLite file): the runs a live `callbackd
/// run`'s bridge is running are listed in its runs file, which a daemon starting on the same
/// data directory leaves alone; those of a daemon that is gone are ended at that start.
#[tokio::test]
async fn a_starting_daemon_ends_only_the_runs_of_daemons_that_are_gone() {
    let app = TestApp::spawn().await;
    app.running_run_r1().await;
    let mut r2 = crate::helpers::run("a2", "r2", 1);
    r2["status"] = json!("running");
    app.store_ok(
        "agents",
        "create",
        json!({"agent": crate::helpers::agent("a2", "/ws", 1)}),
    )
    .await;
    app.store_ok("runs", "create", json!({"run": r2})).await;
    let dir = app.stop().await;
    // A live daemon (a process of ours that runs) owns r1; a gone one (no such pid) r2.
    let mut live = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let file = |pid: u32, run: &str, agent: &str| {
        std::fs::write(
            dir.path().join(format!("callbackd.runs-{pid}.json")),
            json!({"namespace": "default", "runs": {run: agent}}).to_string(),
        )
        .unwrap();
    };
    file(live.id(), "r1", "a1");
    file(u32::MAX - 7, "r2", "a2");
    let app = TestApp::spawn_in(dir, |_| {}).await;
    let r1 = app.api_get("/v1/runs/r1").await.json();
    assert_eq!(
        r1["status"], "running",
        "the live daemon's run was touched: {r1}"
    );
    let r2 = app.api_get("/v1/runs/r2").await.json();
    assert_eq!(r2["status"], "error", "{r2}");
    assert!(
        r2["error"]
            .to_string()
            .contains("the bridge that ran it stopped"),
        "{r2}"
    );
    assert!(app
        .dir
        .path()
        .join(format!("callbackd.runs-{}.json", live.id()))
        .exists());
    assert!(!app
        .dir
        .path()
        .join(format!("callbackd.runs-{}.json", u32::MAX - 7))
        .exists());
    let _ = live.kill();
    let _ = live.wait();
}
