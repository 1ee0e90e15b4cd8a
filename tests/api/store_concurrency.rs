//! Concurrent callers: appends to one run get unique, gap-free seqs; one idempotency key
//! yields one event; one of several racing creates wins.

use std::sync::Arc;

use serde_json::json;

use crate::helpers::TestApp;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parallel_appends_to_one_run_get_unique_gap_free_seqs() {
    let app = Arc::new(TestApp::spawn().await);
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let app = app.clone();
            tokio::spawn(async move {
                let ev = app
                    .store_ok(
                        "runEvents",
                        "append",
                        json!({"runId": "r", "eventType": "e", "payload": {"i": i}}),
                    )
                    .await
                    .unwrap();
                ev["seq"].as_u64().unwrap()
            })
        })
        .collect();
    let mut seqs = Vec::new();
    for t in tasks {
        seqs.push(t.await.unwrap());
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=64).collect::<Vec<_>>());
    let out = app
        .store_ok("runEvents", "list", json!({"runId": "r", "limit": 1000}))
        .await
        .unwrap();
    assert_eq!(out["items"].as_array().unwrap().len(), 64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parallel_appends_with_one_idempotency_key_store_one_event() {
    let app = Arc::new(TestApp::spawn().await);
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            let app = app.clone();
            tokio::spawn(async move {
                app.store_ok(
                    "runEvents",
                    "append",
                    json!({"runId": "r", "eventType": "e", "payload": i, "idempotencyKey": "once"}),
                )
                .await
                .unwrap()
            })
        })
        .collect();
    let mut docs = Vec::new();
    for t in tasks {
        docs.push(t.await.unwrap());
    }
    assert!(
        docs.windows(2).all(|w| w[0] == w[1]),
        "every caller sees the same event"
    );
    assert_eq!(docs[0]["seq"], 1);
    assert_eq!(app.count("SELECT count(*) FROM run_events").await, 1);
}

/// Many runs appended at once, as many agents on one store do (on PostgreSQL such appends
/// share transactions): per run gap-free seqs in the order each caller's appends were
/// answered, and an idempotency key sent twice at once stores one event, both callers
/// seeing it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parallel_appends_to_many_runs_with_repeated_keys_stay_exact_per_run() {
    let app = Arc::new(TestApp::spawn().await);
    let tasks: Vec<_> = (0..6usize)
        .flat_map(|run| (0..24usize).map(move |i| (run, i)))
        .map(|(run, i)| {
            let app = app.clone();
            tokio::spawn(async move {
                // Keys k0..k7, each sent by two callers; the other 8 appends have none.
                let key = (i < 16).then(|| format!("k{}", i / 2));
                let mut input =
                    json!({"runId": format!("m{run}"), "eventType": "e", "payload": {"i": i}});
                if let Some(key) = &key {
                    input["idempotencyKey"] = json!(key);
                }
                let ev = app.store_ok("runEvents", "append", input).await.unwrap();
                (run, key, ev)
            })
        })
        .collect();
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    for run in 0..6 {
        let mine: Vec<_> = answers.iter().filter(|(r, _, _)| *r == run).collect();
        for k in 0..8 {
            let key = format!("k{k}");
            let docs: Vec<_> = mine
                .iter()
                .filter(|(_, kk, _)| kk.as_deref() == Some(&key))
                .map(|(_, _, ev)| ev)
                .collect();
            assert_eq!(docs.len(), 2);
            assert_eq!(
                docs[0], docs[1],
                "run m{run} key {key}: both callers see one event"
            );
        }
        let listed = app
            .store_ok(
                "runEvents",
                "list",
                json!({"runId": format!("m{run}"), "limit": 100}),
            )
            .await
            .unwrap();
        let items = listed["items"].as_array().unwrap();
        let seqs: Vec<u64> = items.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
        assert_eq!(
            seqs,
            (1..=16).collect::<Vec<_>>(),
            "run m{run}: 8 keyed + 8 plain"
        );
        for (_, _, ev) in &mine {
            let stored = &items[ev["seq"].as_u64().unwrap() as usize - 1];
            assert_eq!(ev, stored, "each caller was answered what is stored");
        }
    }
    assert_eq!(app.count("SELECT count(*) FROM run_events").await, 96);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_creates_of_one_agent_have_exactly_one_winner() {
    let app = Arc::new(TestApp::spawn().await);
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let app = app.clone();
            tokio::spawn(async move {
                let doc = json!({"agentId": "same", "cwd": format!("/ws{i}"), "updatedAt": i});
                app.call_store("agents", "create", json!({"agent": doc}))
                    .await
                    .status
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap());
    }
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 1);
    assert_eq!(statuses.iter().filter(|s| **s == 409).count(), 15);
    assert_eq!(app.count("SELECT count(*) FROM agents").await, 1);
}
