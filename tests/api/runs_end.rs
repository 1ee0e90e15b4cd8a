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

/// The crash test for decisions: `callbackd run` with a call held, a decision (approve or
/// deny, alternately) and a kill -9 of callbackd at a random moment around it, a restart on
/// the same store, every round. Never: an approval left pending, an acknowledged decision
/// lost, a tool run without an approval or after a denial, a run left `running`.
/// `CALLBACKD_DECISION_CRASH_ROUNDS` rounds (default 2; docs/hardening.md has a long run),
/// moments from `CALLBACKD_CRASH_SEED` (default: the clock), printed for a replay.
#[tokio::test]
async fn decisions_killed_at_random_moments_keep_their_word_and_no_run_stays_running() {
    use crate::crash::{env_u64, Rng};
    let rounds = env_u64("CALLBACKD_DECISION_CRASH_ROUNDS").unwrap_or(2);
    let seed = env_u64("CALLBACKD_CRASH_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    eprintln!("decision crash test: {rounds} rounds, CALLBACKD_CRASH_SEED={seed}");
    let mut rng = Rng(seed | 1);
    let mut tally = std::collections::BTreeMap::<String, u32>::new();
    for round in 0..rounds {
        let marker_dir = tempfile::tempdir().unwrap();
        let marker = marker_dir.path().join("ran.json");
        let (dir, mut supervised, call, card) =
            crate::approvals_bound::supervised_with_a_held_call(&marker).await;
        let verdict = if round % 2 == 0 { "approve" } else { "deny" };
        let id = card["id"].as_str().unwrap().to_string();
        let addr = supervised.addr;
        let decider = std::thread::spawn({
            let id = id.clone();
            move || {
                crate::approvals_bound::supervise::try_http(
                    addr,
                    "POST",
                    &format!("/v1/approvals/{id}"),
                    crate::approvals_bound::supervise::API_TOKEN,
                    &json!({ "decision": verdict }),
                )
            }
        });
        std::thread::sleep(Duration::from_millis(rng.below(40)));
        supervised.signal(nix::sys::signal::Signal::SIGKILL);
        supervised.wait_exit(Duration::from_secs(10));
        let acked = decider.join().unwrap().filter(|(code, _)| *code == 200);
        call.join().unwrap();
        // A tool the approval let through may still be writing its marker.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let app = TestApp::spawn_in(dir, |c| c.tools.command.push(marker_tool(&marker, ""))).await;
        let one = app.api_get(&format!("/v1/approvals/{id}")).await.json();
        let state = one["state"].as_str().unwrap().to_string();
        assert_ne!(state, "pending", "round {round}: {one}");
        if acked.is_some() {
            let want = if verdict == "approve" {
                "approved"
            } else {
                "denied"
            };
            assert_eq!(
                state, want,
                "round {round}: an acknowledged decision was lost: {one}"
            );
        }
        if state != "approved" {
            assert!(
                !marker.exists(),
                "round {round}: the tool ran without an approval ({one})"
            );
        }
        let run = app.api_get("/v1/runs/r1").await.json();
        assert!(
            ["finished", "error", "cancelled", "expired"]
                .contains(&run["status"].as_str().unwrap()),
            "round {round}: {run}"
        );
        *tally
            .entry(format!(
                "{verdict}->{state}{}",
                if marker.exists() { "+ran" } else { "" }
            ))
            .or_default() += 1;
        app.stop().await;
    }
    eprintln!("decision crash test outcomes: {tally:?}");
}
