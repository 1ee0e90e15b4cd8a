//! Streams under abuse (issue 41): keepalives at any interval, the places of clients that
//! left given back at once, and one namespace unable to hold every place.

use std::time::{Duration, Instant};

use callbackd::namespaces::NamespaceConfig;
use callbackd::secret::Secret;

use crate::helpers::TestApp;
use crate::run_api::{append, setup, tool_turn};
use crate::sse::{Frame, Sse};

const T: Duration = Duration::from_secs(10);

/// Frames until the first keepalive comment; panics when none comes within `within`.
async fn until_keepalive(s: &mut Sse, within: Duration) -> Vec<Frame> {
    let mut seen = Vec::new();
    loop {
        match s.next(within).await {
            Some(Frame::Comment(c)) if c == "keepalive" => return seen,
            Some(f) => seen.push(f),
            None => panic!("the stream ended before a keepalive: {seen:?}"),
        }
    }
}

/// The default `keepalive_ms` (15 s) is longer than the stream's 2 s fallback read: the
/// keepalive must still come, counted from the last frame sent. Broken by computing the
/// deadline again each time the wait is entered (as before), this waits 25 s and fails.
#[tokio::test]
async fn an_idle_stream_gets_its_keepalive_at_the_default_interval() {
    let app = TestApp::spawn().await;
    assert_eq!(callbackd::config::ApiConfig::default().keepalive_ms, 15_000);
    setup(&app, "r1", "running").await;
    let mut s = app.stream("r1", None).await;
    assert_eq!(s.next(T).await.unwrap().kind(), "up_to_date");
    let since = Instant::now();
    let before = until_keepalive(&mut s, Duration::from_secs(25)).await;
    assert!(before.is_empty(), "{before:?}");
    assert!(
        since.elapsed() >= Duration::from_secs(12),
        "a keepalive after {:?}, not the configured 15 s",
        since.elapsed()
    );
}

/// An interval between the internal ticks' multiples: every one of three keepalives comes.
#[tokio::test]
async fn keepalives_longer_than_the_fallback_read_keep_coming() {
    let app = TestApp::spawn_with(|c| c.api.keepalive_ms = 2_500).await;
    setup(&app, "r1", "running").await;
    let mut s = app.stream("r1", None).await;
    assert_eq!(s.next(T).await.unwrap().kind(), "up_to_date");
    for _ in 0..3 {
        let before = until_keepalive(&mut s, T).await;
        assert!(before.is_empty(), "{before:?}");
    }
    // An event in between does not stop them.
    append(&app, "r1", tool_turn()[0].clone()).await;
    let before = until_keepalive(&mut s, T).await;
    assert_eq!(before.len(), 1, "{before:?}");
}

/// Opens streams until one is refused; the open ones and the refused one's problem.
async fn fill(app: &TestApp, run_id: &str, max: usize) -> (Vec<Sse>, Sse) {
    let mut open = Vec::new();
    for _ in 0..=max {
        let mut s = app.stream(run_id, None).await;
        if s.status != 200 {
            return (open, s);
        }
        assert_eq!(s.next(T).await.unwrap().kind(), "up_to_date");
        open.push(s);
    }
    panic!("{} streams opened, more than the cap", open.len());
}

/// Streams whose clients left free their places within seconds, with no event and no
/// keepalive due (keepalives at the default 15 s). Broken by removing the wait on the
/// closed pipe in the stream's loop, the eleventh stream is refused for 15 s and this fails.
#[tokio::test]
async fn ten_streams_opened_and_closed_leave_room_for_the_next_within_seconds() {
    let app = TestApp::spawn_with(|c| c.api.max_streams = 10).await;
    setup(&app, "r1", "running").await;
    let (open, refused) = fill(&app, "r1", 10).await;
    assert_eq!(open.len(), 10);
    assert_eq!(refused.status, 429);
    drop(open);
    let since = Instant::now();
    let _next = loop {
        let mut s = app.stream("r1", None).await;
        if s.status == 200 {
            assert_eq!(s.next(T).await.unwrap().kind(), "up_to_date");
            break s;
        }
        assert_eq!(s.status, 429);
        assert!(
            since.elapsed() < Duration::from_secs(5),
            "the closed streams still hold their places"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // All ten places came back, not one: nine more beside the one just opened.
    let (open, _) = fill(&app, "r1", 10).await;
    assert_eq!(open.len(), 9);
}

fn namespace(name: &str) -> (NamespaceConfig, [String; 3]) {
    let t = |role: &str| format!("{name}-{role}-token-0123456789abcdef");
    let (store, tool, api) = (t("store"), t("tool"), t("api"));
    let config = NamespaceConfig {
        name: name.into(),
        store_token: Some(Secret::new(store.clone())),
        tool_token: Some(Secret::new(tool.clone())),
        api_token: Some(Secret::new(api.clone())),
        ..Default::default()
    };
    (config, [store, tool, api])
}

/// With namespaces, one namespace holds at most its share (half of `max_streams` by
/// default): the others still open streams. Broken by taking only the global permit, a's
/// streams take all 6 places and b's stream is refused.
#[tokio::test]
async fn one_namespace_cannot_hold_every_stream_place() {
    let (a, ta) = namespace("a");
    let (b, tb) = namespace("b");
    let mut app = TestApp::spawn_with(move |c| {
        c.api.max_streams = 6;
        c.namespaces = vec![a, b];
    })
    .await;
    let act = |app: &mut TestApp, t: &[String; 3]| {
        app.store_token = t[0].clone();
        app.tool_token = t[1].clone();
        app.api_token = t[2].clone();
    };
    act(&mut app, &ta);
    setup(&app, "r1", "running").await;
    let (a_open, refused) = fill(&app, "r1", 6).await;
    assert_eq!(a_open.len(), 3, "a's share is half of 6");
    assert_eq!(refused.status, 429);
    let problem = refused.problem.expect("problem+json");
    let detail = problem["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("namespace a"), "{problem}");
    act(&mut app, &tb);
    setup(&app, "r1", "running").await;
    let (b_open, refused) = fill(&app, "r1", 6).await;
    assert_eq!(b_open.len(), 3, "b gets its own share");
    assert_eq!(refused.status, 429);
}

/// A client that asks for a stream and never reads it, with a tiny receive buffer.
async fn stalled_stream(app: &TestApp, run_id: &str) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut s = socket.connect(app.addr).await.unwrap();
    let request = format!(
        "GET /v1/runs/{run_id}/stream HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {}\r\n\r\n",
        app.addr, app.api_token
    );
    s.write_all(request.as_bytes()).await.unwrap();
    s
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1.0)
}

/// Readers that take nothing of a big run are dropped once their stream has waited
/// `slow_reader_ms` for room (the queue is bounded in bytes, so they reach it), and their
/// connections are cut so that nothing stays buffered for them; a reader resumes with
/// `after`. Broken by a queue bounded in frames (64 frames of 100 KB each never fill a
/// window that a client's tiny buffer stops), the streams stay open and this fails.
#[tokio::test]
async fn readers_that_never_read_a_big_run_are_dropped_and_cut() {
    let app = TestApp::spawn_with(|c| {
        c.api.slow_reader_ms = 300;
        c.api.stream_buffer_bytes = 64 * 1024;
    })
    .await;
    setup(&app, "r1", "running").await;
    let big = "x".repeat(100_000);
    for _ in 0..80 {
        append(
            &app,
            "r1",
            serde_json::json!({"type": "thinking", "text": big}),
        )
        .await;
    }
    let mut stalled = Vec::new();
    for _ in 0..3 {
        stalled.push(stalled_stream(&app, "r1").await);
    }
    let open_streams = || async {
        let text = app.api("GET", "/metrics", None, "").await.text();
        metric(&text, "callbackd_streams_open")
    };
    let since = Instant::now();
    while open_streams().await != 3.0 {
        assert!(since.elapsed() < T, "the three streams did not open");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    while open_streams().await != 0.0 {
        assert!(
            since.elapsed() < Duration::from_secs(30),
            "readers that never read are still open"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Their connections were cut: each read ends (EOF or reset) instead of waiting.
    for mut s in stalled {
        use tokio::io::AsyncReadExt;
        let mut sink = Vec::new();
        let ended = tokio::time::timeout(T, s.read_to_end(&mut sink)).await;
        eprintln!("read {} bytes: {ended:?}", sink.len());
        assert!(ended.is_ok(), "a dropped reader's connection is still open");
    }
    // A reader that reads gets everything, and resumes after any position.
    let mut s = app.stream("r1", Some(70)).await;
    let mut ids = Vec::new();
    loop {
        match s.next(T).await.expect("the stream goes on") {
            Frame::Event { id: Some(id), .. } => ids.push(id),
            f if f.kind() == "up_to_date" => break,
            _ => {}
        }
    }
    assert_eq!(ids, (71..=80).collect::<Vec<_>>());
}
