//! The connection cap and the header read timeout: idle or slow clients can hold at most
//! `server.max_connections` connections, each only until its header timeout, and past the
//! cap a reserve (an eighth of it, at least 4) whose connections must send their request
//! head within 1 s: a well-behaved client (the bridge) is served at once below the cap, and
//! within about a second when slow clients fill the cap and the reserve.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::daemon::{self, Conn, Daemon, Req, STORE_PATH};

const CAP: usize = 8;
/// `server::reserve_size(CAP)`.
const RESERVE: usize = 4;
const HEADER_TIMEOUT: Duration = Duration::from_millis(4000);

fn start(dir: &std::path::Path) -> Daemon {
    daemon::start(
        dir,
        &dir.join("limits.db"),
        &[
            ("server", &format!("max_connections = {CAP}")),
            (
                "server",
                &format!("header_read_timeout_ms = {}", HEADER_TIMEOUT.as_millis()),
            ),
        ],
    )
}

/// One well-formed request on a fresh connection; returns its status and how long it took.
async fn well_behaved(addr: std::net::SocketAddr) -> (u16, Duration) {
    let started = Instant::now();
    let body = json!({"substore": "agents", "method": "get", "input": {"agentId": "nobody"}});
    let reply = tokio::time::timeout(Duration::from_secs(15), async {
        let mut c = Conn::open(addr).await.expect("connect");
        c.send(&Req::store(body.to_string().as_bytes()).build())
            .await
            .expect("send")
            .expect("answered")
    })
    .await
    .expect("answered within 15 s");
    (reply.status, started.elapsed())
}

/// A client that dribbles a request head one byte every 100 ms and never finishes it.
fn dribbler(addr: std::net::SocketAddr) -> tokio::task::JoinHandle<Conn> {
    tokio::spawn(async move {
        let mut c = Conn::open(addr).await.expect("connect");
        let head = format!("POST {STORE_PATH} HTTP/1.1\r\nhost: x\r\nx-slow: ");
        for b in head.bytes().chain(std::iter::repeat(b'z')).take(30) {
            if c.write(&[b]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        c
    })
}

async fn steady_fds(daemon: &Daemon) -> usize {
    let mut last = daemon.open_fds();
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = daemon.open_fds();
        if now == last {
            return now;
        }
        last = now;
    }
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_cannot_starve_a_well_behaved_one() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = start(dir.path());
    // One request first, so the store's read connection is open in the baseline.
    assert_eq!(well_behaved(daemon.addr).await.0, 200);
    let base_fds = steady_fds(&daemon).await;

    // Below the cap: CAP - 1 idle connections leave a slot; the request is served at once.
    let mut idle = Vec::new();
    for _ in 0..CAP - 1 {
        idle.push(Conn::open(daemon.addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (status, took) = well_behaved(daemon.addr).await;
    assert_eq!(status, 200);
    assert!(
        took < HEADER_TIMEOUT - Duration::from_millis(300),
        "below the cap the request waited {took:?}"
    );
    for c in &mut idle {
        assert!(
            c.closed_within(HEADER_TIMEOUT + Duration::from_secs(3))
                .await,
            "an idle connection outlived the header timeout"
        );
    }
    drop(idle);
    steady_fds(&daemon).await;

    // At the cap: half idle, half dribbling heads, and the reserve full of dribblers too.
    // The reserve cuts its slow clients after 1 s, so the well-behaved client is served
    // within about that, long before the cap's slow clients reach their header timeout.
    // Broken by serving without the reserve, it waits the whole header timeout and fails.
    let pinned_at = Instant::now();
    let mut idle = Vec::new();
    for _ in 0..CAP / 2 {
        idle.push(Conn::open(daemon.addr).await.unwrap());
    }
    let dribblers: Vec<_> = (0..CAP / 2 + RESERVE)
        .map(|_| dribbler(daemon.addr))
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let waiting = tokio::spawn(well_behaved(daemon.addr));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pinned_fds = daemon.open_fds();
    assert!(
        pinned_fds <= base_fds + CAP + RESERVE,
        "the daemon holds {pinned_fds} fds with {CAP} + {RESERVE} connections allowed (baseline {base_fds})"
    );
    let (status, _) = waiting.await.unwrap();
    let served_after = pinned_at.elapsed();
    assert_eq!(status, 200);
    assert!(
        served_after < HEADER_TIMEOUT,
        "served only after {served_after:?}: slow clients pinned the daemon"
    );
    for mut c in idle {
        assert!(
            c.closed_within(HEADER_TIMEOUT + Duration::from_secs(1))
                .await
        );
    }
    for d in dribblers {
        let mut c = d.await.unwrap();
        assert!(
            c.closed_within(HEADER_TIMEOUT + Duration::from_secs(1))
                .await
        );
    }
    assert!(steady_fds(&daemon).await <= base_fds + 1);
    assert!(daemon.stop().success());
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_header_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = start(dir.path());
    let mut c = daemon.connect().await;
    let body = json!({"substore": "agents", "method": "get", "input": {"agentId": "x"}});
    let req = Req::store(body.to_string().as_bytes()).build();
    for _ in 0..3 {
        let reply = c.send(&req).await.unwrap().unwrap();
        assert_eq!(reply.status, 200);
    }
    let idle_from = Instant::now();
    assert!(
        c.closed_within(HEADER_TIMEOUT + Duration::from_secs(3))
            .await
    );
    assert!(idle_from.elapsed() >= HEADER_TIMEOUT - Duration::from_millis(200));
}
