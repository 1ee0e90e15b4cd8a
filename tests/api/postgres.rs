//! What only the PostgreSQL backend has to prove: several daemons on one database, and
//! startup errors that say what to fix (the server restart is tests/pg_faults). Each test runs when the
//! suite runs on PostgreSQL (`CALLBACKD_TEST_BACKEND=postgres`) and returns at once on
//! SQLite, where there is nothing of this to test; scripts/test runs the suite on both.

use std::collections::BTreeMap;
use std::sync::Arc;

use callbackd::config::Config;
use callbackd::{App, StoreNotice};
use serde_json::json;

use crate::helpers::{backend, Backend, PgTarget, TestApp};

/// The test's schema, or `None` on SQLite.
fn target() -> Option<PgTarget> {
    if backend() != Backend::Postgres {
        eprintln!("not a PostgreSQL run: nothing to test");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    Some(PgTarget::for_dir(dir.path()))
}

/// A daemon on `pg`'s schema, with its own directory (its own tokens).
async fn daemon_on(pg: &PgTarget) -> TestApp {
    daemon_with(pg, |_| {}).await
}

/// [`daemon_on`] with a config tweak applied after the schema's (another URL, say).
async fn daemon_with(pg: &PgTarget, tweak: impl FnOnce(&mut Config)) -> TestApp {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pg-schema"), &pg.schema).unwrap();
    TestApp::spawn_in(dir, tweak).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn appends_from_three_daemons_to_the_same_runs_are_gap_free_and_idempotent() {
    let Some(pg) = target() else { return };
    let daemons: Vec<Arc<TestApp>> = vec![
        Arc::new(daemon_on(&pg).await),
        Arc::new(daemon_on(&pg).await),
        Arc::new(daemon_on(&pg).await),
    ];
    let mut tasks = Vec::new();
    for (d, app) in daemons.iter().enumerate() {
        for w in 0..4 {
            let app = app.clone();
            tasks.push(tokio::spawn(async move {
                let mut acked = Vec::new();
                for i in 0..25 {
                    let run = format!("run-{}", i % 2);
                    // Every daemon also appends the same keyed events: one of them wins each.
                    let key = format!("k-{}-{w}", i % 5);
                    let payload = json!({"d": d, "w": w, "i": i});
                    let ev = app
                        .store_ok(
                            "runEvents",
                            "append",
                            json!({"runId": run, "eventType": "e", "payload": payload,
                                   "idempotencyKey": if i % 3 == 0 { Some(key) } else { None }}),
                        )
                        .await
                        .unwrap();
                    acked.push((run, ev));
                }
                acked
            }));
        }
    }
    let mut acked = Vec::new();
    for t in tasks {
        acked.extend(t.await.unwrap());
    }
    for run in ["run-0", "run-1"] {
        let page = daemons[0]
            .store_ok("runEvents", "list", json!({"runId": run, "limit": 1000}))
            .await
            .unwrap();
        let items = page["items"].as_array().unwrap();
        let seqs: Vec<u64> = items.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
        assert_eq!(
            seqs,
            (1..=seqs.len() as u64).collect::<Vec<_>>(),
            "{run}: gap-free"
        );
        let by_seq: BTreeMap<u64, &serde_json::Value> = items
            .iter()
            .map(|e| (e["seq"].as_u64().unwrap(), e))
            .collect();
        // Every acknowledged event is the stored one at its seq (a keyed repeat answers the
        // first event, which is stored).
        for (r, ev) in acked.iter().filter(|(r, _)| r == run) {
            let seq = ev["seq"].as_u64().unwrap();
            assert_eq!(
                by_seq.get(&seq),
                Some(&ev),
                "{r}: event {seq} as acknowledged"
            );
        }
        let keys: Vec<&str> = items
            .iter()
            .filter_map(|e| e["idempotencyKey"].as_str())
            .collect();
        let mut unique = keys.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(keys.len(), unique.len(), "{run}: one event per key");
    }
    drop(daemons);
    pg.drop_schema();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn daemons_starting_at_once_on_a_new_schema_migrate_it_once() {
    let Some(pg) = target() else { return };
    let starts: Vec<_> = (0..4)
        .map(|_| {
            let pg = pg.clone();
            tokio::spawn(async move { daemon_on(&pg).await })
        })
        .collect();
    let mut apps = Vec::new();
    for s in starts {
        apps.push(s.await.unwrap());
    }
    assert_eq!(
        apps[0]
            .count("SELECT count(*) FROM callbackd_migrations")
            .await,
        i64::from(callbackd::store::postgres::migrate::LATEST_VERSION)
    );
    apps[1]
        .store_ok(
            "agents",
            "create",
            json!({"agent": crate::helpers::agent("a", "/w", 1)}),
        )
        .await;
    assert!(apps[3]
        .store_ok("agents", "get", json!({"agentId": "a"}))
        .await
        .is_some());
    drop(apps);
    pg.drop_schema();
}

/// The startup error of a daemon configured with `tweak` on `pg`.
async fn startup_error(pg: &PgTarget, tweak: impl FnOnce(&mut Config)) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.server.listen = "127.0.0.1:0".into();
    config.store.path = dir.path().join("t.db");
    pg.apply(&mut config);
    config.store.connect_timeout_ms = 1000;
    tweak(&mut config);
    match App::build(config).await {
        Ok(_) => panic!("the daemon started"),
        Err(e) => format!("{e:#}"),
    }
}

#[tokio::test]
async fn an_unreachable_server_is_a_startup_error_naming_the_url_without_its_password() {
    let Some(pg) = target() else { return };
    // A port nothing listens on (bound, then closed).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://callbackd:hunter2@127.0.0.1:{port}/postgres");
    let err = startup_error(&pg, |c| c.store.set_location(&url)).await;
    assert!(
        err.contains(&format!(
            "postgres://callbackd:***@127.0.0.1:{port}/postgres"
        )),
        "{err}"
    );
    assert!(err.contains("cannot connect"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
}

#[tokio::test]
async fn bad_store_settings_are_refused_before_anything_starts() {
    let Some(pg) = target() else { return };
    let err = startup_error(&pg, |c| c.store.set_location("postgres://u:pw@[bad")).await;
    assert!(err.contains("not a valid PostgreSQL URL"), "{err}");
    assert!(!err.contains(":pw@"), "{err}");
    let err = startup_error(&pg, |c| c.store.schema = Some("x; DROP TABLE y".into())).await;
    assert!(err.contains("store.schema"), "{err}");
    let toml_err = toml::from_str::<Config>("[store]\nbackend = \"mysql\"\n").unwrap_err();
    assert!(toml_err.to_string().contains("mysql"), "{toml_err}");
}

#[tokio::test]
async fn a_user_without_create_permission_is_told_what_to_grant() {
    let Some(pg) = target() else { return };
    let admin = pg.connect().await;
    let role = format!("{}_ro", pg.schema);
    admin
        .batch_execute(&format!(
            "CREATE SCHEMA \"{s}\"; CREATE ROLE \"{role}\" LOGIN; \
             GRANT USAGE ON SCHEMA \"{s}\" TO \"{role}\"; \
             REVOKE CREATE ON DATABASE postgres FROM PUBLIC;",
            s = pg.schema
        ))
        .await
        .unwrap();
    let url = pg.url.replacen("//callbackd@", &format!("//{role}@"), 1);
    let err = startup_error(&pg, |c| c.store.set_location(&url)).await;
    pg.drop_schema();
    admin
        .batch_execute(&format!(
            "GRANT CREATE ON DATABASE postgres TO PUBLIC; DROP ROLE \"{role}\";"
        ))
        .await
        .unwrap();
    assert!(err.contains("may not create tables"), "{err}");
    assert!(err.contains("GRANT CREATE ON SCHEMA"), "{err}");
}

/// The next notice within `within`, if any.
async fn next_notice(
    rx: &mut tokio::sync::broadcast::Receiver<StoreNotice>,
    within: std::time::Duration,
) -> Option<StoreNotice> {
    tokio::time::timeout(within, rx.recv())
        .await
        .ok()
        .map(|r| r.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_on_one_daemon_hears_appends_made_through_another() {
    let Some(pg) = target() else { return };
    let a = daemon_on(&pg).await;
    let b = daemon_on(&pg).await;
    let mut rx = b.store.subscribe();
    let second = std::time::Duration::from_secs(5);
    a.store_ok(
        "runEvents",
        "append",
        json!({"runId": "r", "eventType": "e"}),
    )
    .await;
    let heard = next_notice(&mut rx, second).await;
    let Some(StoreNotice::Remote(n)) = heard else {
        panic!("B heard {heard:?}")
    };
    assert_eq!(
        (n.run_id.as_str(), n.seq, n.ns.as_str()),
        ("r", 1, "default")
    );
    // B's own append: announced once (locally), not again through the listener.
    b.store_ok(
        "runEvents",
        "append",
        json!({"runId": "r", "eventType": "e"}),
    )
    .await;
    let Some(StoreNotice::Appended(n)) = next_notice(&mut rx, second).await else {
        panic!("B's own append was not announced")
    };
    assert_eq!(n.seq, 2);
    let again = next_notice(&mut rx, std::time::Duration::from_millis(500)).await;
    assert!(
        !matches!(
            again,
            Some(StoreNotice::Appended(_) | StoreNotice::Remote(_))
        ),
        "announced twice: {again:?}"
    );
    // An idempotent repeat wrote nothing and announces nothing.
    let key = json!({"runId": "r", "eventType": "e", "idempotencyKey": "k"});
    a.store_ok("runEvents", "append", key.clone()).await;
    assert!(matches!(
        next_notice(&mut rx, second).await,
        Some(StoreNotice::Remote(_))
    ));
    a.store_ok("runEvents", "append", key).await;
    let repeat = next_notice(&mut rx, std::time::Duration::from_millis(500)).await;
    assert!(
        !matches!(
            repeat,
            Some(StoreNotice::Appended(_) | StoreNotice::Remote(_))
        ),
        "a repeat was announced: {repeat:?}"
    );
    drop((a, b));
    pg.drop_schema();
}

/// A trigger on `agents` that fails the first `times` inserts with `sqlstate` (counted by
/// a sequence: nextval survives the rollback the failure causes).
async fn fail_inserts(pg: &PgTarget, sqlstate: &str, times: i32) {
    pg.connect()
        .await
        .batch_execute(&format!(
            "DROP TRIGGER IF EXISTS fail_some ON agents; DROP SEQUENCE IF EXISTS fail_seq;
             CREATE SEQUENCE fail_seq;
             CREATE OR REPLACE FUNCTION fail_some() RETURNS trigger AS $$
             BEGIN
               IF nextval('fail_seq') <= {times} THEN
                 RAISE EXCEPTION 'injected' USING ERRCODE = '{sqlstate}';
               END IF;
               RETURN NEW;
             END $$ LANGUAGE plpgsql;
             CREATE TRIGGER fail_some BEFORE INSERT ON agents FOR EACH ROW EXECUTE FUNCTION fail_some();"
        ))
        .await
        .unwrap();
}

#[tokio::test]
async fn serialization_failures_and_deadlocks_are_run_again_not_answered_internal() {
    let Some(pg) = target() else { return };
    let app = daemon_on(&pg).await;
    for (i, code) in ["40001", "40P01"].into_iter().enumerate() {
        fail_inserts(&pg, code, 3).await;
        let doc = crate::helpers::agent(&format!("a{i}"), "/w", 1);
        assert_eq!(
            app.store_ok("agents", "create", json!({"agent": doc}))
                .await,
            Some(doc),
            "{code}: succeeds on a later attempt"
        );
        assert_eq!(
            app.count("SELECT last_value FROM fail_seq").await,
            4,
            "{code}: three failed attempts, then one that worked"
        );
    }
    // A conflict that never goes away is unavailable (try again later), not internal.
    fail_inserts(&pg, "40001", 1000).await;
    let (code, msg) = app
        .store_err(
            "agents",
            "create",
            json!({"agent": crate::helpers::agent("z", "/w", 1)}),
        )
        .await;
    assert_eq!(code, "unavailable", "{msg}");
    drop(app);
    pg.drop_schema();
}

#[tokio::test]
async fn a_statement_over_the_timeout_is_unavailable_naming_the_setting() {
    let Some(pg) = target() else { return };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pg-schema"), &pg.schema).unwrap();
    let app = TestApp::spawn_in(dir, |c| c.store.statement_timeout_ms = 200).await;
    pg.connect()
        .await
        .batch_execute(
            "CREATE FUNCTION slow() RETURNS trigger AS $$
             BEGIN PERFORM pg_sleep(2); RETURN NEW; END $$ LANGUAGE plpgsql;
             CREATE TRIGGER slow BEFORE INSERT ON agents FOR EACH ROW EXECUTE FUNCTION slow();",
        )
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let (code, msg) = app
        .store_err(
            "agents",
            "create",
            json!({"agent": crate::helpers::agent("a", "/w", 1)}),
        )
        .await;
    assert_eq!(code, "unavailable", "{msg}");
    assert!(msg.contains("statement_timeout_ms"), "{msg}");
    assert!(started.elapsed() < std::time::Duration::from_millis(1500));
    assert_eq!(app.count("SELECT count(*) FROM agents").await, 0);
    drop(app);
    pg.drop_schema();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deletes_racing_appends_on_another_daemon_leave_seqs_gap_free() {
    let Some(pg) = target() else { return };
    let a = Arc::new(daemon_on(&pg).await);
    let b = daemon_on(&pg).await;
    let appenders: Vec<_> = (0..3)
        .map(|w| {
            let a = a.clone();
            tokio::spawn(async move {
                for i in 0..40 {
                    a.store_ok(
                        "runEvents",
                        "append",
                        json!({"runId": "r", "eventType": "e", "payload": {"w": w, "i": i}}),
                    )
                    .await;
                }
            })
        })
        .collect();
    for _ in 0..15 {
        b.store_ok("runEvents", "delete", json!({"filter": {"runIds": ["r"]}}))
            .await;
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    for t in appenders {
        t.await.unwrap();
    }
    // Whatever survived the last delete numbers 1..n, as SQLite's max(seq) + 1 would.
    let page = b
        .store_ok("runEvents", "list", json!({"runId": "r", "limit": 1000}))
        .await
        .unwrap();
    let seqs: Vec<u64> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    let next = a
        .store_ok(
            "runEvents",
            "append",
            json!({"runId": "r", "eventType": "e"}),
        )
        .await
        .unwrap();
    assert_eq!(next["seq"].as_u64().unwrap(), seqs.len() as u64 + 1);
    drop((a, b));
    pg.drop_schema();
}

/// The issue's multi-host case at the run API: a stream opened on daemon B follows a run
/// whose events are appended through daemon A, each event arriving well before the
/// stream's 2 s fallback re-read (so it is A's NOTIFY that wakes B), to its terminal event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_api_stream_on_one_daemon_follows_appends_through_another() {
    use crate::run_api::{append, setup, tool_turn};
    let Some(pg) = target() else { return };
    let a = daemon_on(&pg).await;
    let b = daemon_on(&pg).await;
    setup(&a, "r1", "running").await;
    let turn = tool_turn();
    append(&a, "r1", turn[0].clone()).await;
    let mut s = b.stream("r1", None).await;
    assert_eq!(s.status, 200);
    let quick = std::time::Duration::from_millis(1000);
    // A fresh run whose prompt nobody stored yet: `run_started` waits up to 2 s for it (or
    // for the run's first output), so that every reader gets the same bytes (api/prompt.rs).
    let prompt_wait = std::time::Duration::from_secs(4);
    assert_eq!(s.next(prompt_wait).await.unwrap().kind(), "run_started");
    assert_eq!(s.next(quick).await.unwrap().kind(), "up_to_date");
    let mut kinds = Vec::new();
    for (i, m) in turn[1..].iter().enumerate() {
        append(&a, "r1", m.clone()).await;
        let started = std::time::Instant::now();
        let frame = s.next(quick).await.expect("B's stream hears A's append");
        assert!(
            started.elapsed() < quick,
            "event {} took {:?}",
            i + 2,
            started.elapsed()
        );
        match &frame {
            crate::sse::Frame::Event { id: Some(id), .. } => {
                assert_eq!(*id, i as u64 + 2, "{frame:?}")
            }
            other => panic!("event {} came as {other:?}", i + 2),
        }
        kinds.push(frame.kind().to_string());
    }
    // The last append was the terminal event: the stream ends there, with nothing after it.
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("completed"),
        "{kinds:?}"
    );
    let rest = s.collect(std::time::Duration::from_secs(10)).await;
    assert!(rest.is_empty(), "after the terminal event: {rest:?}");
    drop((a, b));
    pg.drop_schema();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_finds_a_corrupted_blob_and_names_it() {
    let Some(pg) = target() else { return };
    let app = daemon_on(&pg).await;
    for blob in ["good", "bad"] {
        app.store_ok(
            "checkpoints",
            "create",
            json!({"agentId": "a", "blobId": blob, "data": "AAECAw=="}),
        )
        .await;
    }
    let mut config = Config::default();
    pg.apply(&mut config);
    let report = config.store.backend().check().await.unwrap();
    assert!(report.is_ok() && report.blobs_checked == 2, "{report:?}");
    app.exec(
        "",
        "UPDATE checkpoints SET data = '\\x00010204'::bytea WHERE blob_id = 'bad'",
    )
    .await;
    let report = config.store.backend().check().await.unwrap();
    assert_eq!(
        report.schema_version,
        callbackd::store::postgres::migrate::LATEST_VERSION
    );
    assert_eq!(
        report.corrupt_blobs,
        [("default".into(), "a".into(), "bad".into())]
    );
    drop(app);
    pg.drop_schema();
}

/// A server on the same host, reached through its Unix socket: the socket's directory,
/// percent-encoded, as the URL's host (libpq's form). scripts/pg-cluster puts the socket in
/// the cluster's directory (`CALLBACKD_TEST_PG_DIR`); against a server of one's own, skipped
/// (a failure under CI, which always runs it: scripts/test sets the directory).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_same_host_server_is_reached_through_its_unix_socket() {
    let Some(pg) = target() else { return };
    let Ok(cluster) = std::env::var("CALLBACKD_TEST_PG_DIR") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs this test: set CALLBACKD_TEST_PG_DIR"
        );
        eprintln!("CALLBACKD_TEST_PG_DIR unset: the socket's directory is unknown");
        return;
    };
    let tcp: tokio_postgres::Config = pg.url.parse().unwrap();
    let name = format!("socket-test-{}", pg.schema);
    let socket_url = format!(
        "postgres://{}@{}:{}/{}?application_name={name}",
        tcp.get_user().unwrap(),
        cluster.replace('%', "%25").replace('/', "%2F"),
        tcp.get_ports()[0],
        tcp.get_dbname().unwrap_or("postgres"),
    );
    let local = daemon_with(&pg, |c| c.store.set_location(&socket_url)).await;
    let appended = local
        .store_ok(
            "runEvents",
            "append",
            json!({"runId": "r", "eventType": "run_stream_event", "payload": {"n": 1}}),
        )
        .await
        .unwrap();
    // The daemon's pooled connections (named in the URL) came through the socket: no
    // client address.
    let (over_socket, over_tcp) = (
        local.count(&format!("SELECT count(*) FROM pg_stat_activity WHERE application_name = '{name}' AND client_addr IS NULL")).await,
        local.count(&format!("SELECT count(*) FROM pg_stat_activity WHERE application_name = '{name}' AND client_addr IS NOT NULL")).await,
    );
    assert!(
        over_socket >= 1 && over_tcp == 0,
        "{over_socket} over the socket, {over_tcp} over TCP"
    );
    // Another daemon over TCP reads what went through the socket.
    let remote = daemon_on(&pg).await;
    let listed = remote
        .store_ok("runEvents", "list", json!({"runId": "r"}))
        .await
        .unwrap();
    assert_eq!(listed["items"][0], appended);
    drop((local, remote));
    pg.drop_schema();
}
