//! Resource faults: a full disk answers `resource_exhausted` (429) and recovers when space
//! returns, with every acknowledged write intact; a locked, read-only or foreign database
//! file is a clear startup error (non-zero exit, the file and the problem named).
//!
//! The full disk is simulated two ways: SQLite's page cap (`store.max_pages`), and a real
//! tiny tmpfs that is grown with `mount -o remount`. Where mounting (or `chattr`) is not
//! permitted, those parts fail when `CI` or `CALLBACKD_FAULTS_REQUIRED=1` is set (CI runs
//! as root; scripts/test sets the variable), and are skipped with a `SKIPPED` message
//! otherwise. Root ignores file modes: the read-only directory's test runs its daemon as
//! `nobody` when the tests run as root.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::daemon::{self, Daemon, Req};

/// Appends to `run` from 4 clients until the store answers `resource_exhausted` (which it
/// must, when `until_full`) or `max` appends were acknowledged; returns the acknowledged
/// `payload.i -> seq`. Any answer other than 200 or 429 `resource_exhausted` fails the test.
async fn fill(
    daemon: &Daemon,
    run: &str,
    first_i: u64,
    size: usize,
    max: usize,
    until_full: bool,
) -> BTreeMap<u64, u64> {
    let mut tasks = Vec::new();
    for w in 0..4u64 {
        let addr = daemon.addr;
        let run = run.to_string();
        tasks.push(tokio::spawn(async move {
            let mut acked = BTreeMap::new();
            let mut conn = daemon::Conn::open(addr).await.unwrap();
            for k in 0..(max as u64 / 4) {
                let i = first_i + k * 4 + w;
                let body = json!({"substore": "runEvents", "method": "append",
                    "input": {"runId": run, "eventType": "e", "payload": daemon::payload(i, size)}});
                let reply = conn
                    .send(&Req::store(body.to_string().as_bytes()).build())
                    .await
                    .unwrap()
                    .expect("answered");
                match reply.status {
                    200 => {
                        acked.insert(i, reply.json()["output"]["seq"].as_u64().unwrap());
                    }
                    429 => {
                        assert_eq!(reply.connect_code().as_deref(), Some("resource_exhausted"));
                        assert!(reply.text().contains("out of disk space"), "{}", reply.text());
                        return (acked, true);
                    }
                    _ => panic!("append answered {} {}", reply.status, reply.text()),
                }
            }
            (acked, false)
        }));
    }
    let mut all = BTreeMap::new();
    let mut full = false;
    for t in tasks {
        let (acked, hit) = t.await.unwrap();
        all.extend(acked);
        full |= hit;
    }
    if until_full {
        assert!(
            full,
            "the store never filled up ({} appends acknowledged)",
            all.len()
        );
    }
    all
}

/// Every acknowledged append is stored at its seq, seqs are 1..=n, the file is intact.
fn verify(db: &Path, run: &str, acked: &BTreeMap<u64, u64>) {
    let stored = daemon::events(db, run);
    let seqs: Vec<u64> = stored.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "{run}: seqs gap-free"
    );
    let by_i: BTreeMap<u64, u64> = stored.iter().map(|(seq, i)| (*i, *seq)).collect();
    assert_eq!(by_i.len(), stored.len(), "{run}: no event stored twice");
    for (i, seq) in acked {
        assert_eq!(
            by_i.get(i),
            Some(seq),
            "{run}: acknowledged event {i} at seq {seq}"
        );
    }
    assert_eq!(daemon::integrity(db), "ok");
}

/// Reads a run's events through the daemon, all pages.
async fn listed(daemon: &Daemon, run: &str) -> usize {
    let (mut n, mut offset) = (0, String::new());
    loop {
        let out = daemon
            .ok(
                "runEvents",
                "list",
                json!({"runId": run, "afterOffset": offset, "limit": 50}),
            )
            .await;
        n += out["items"].as_array().unwrap().len();
        match out["nextOffset"].as_str() {
            Some(next) => offset = next.to_string(),
            None => return n,
        }
    }
}

fn page_count(db: &Path) -> u64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("PRAGMA page_count", [], |r| r.get::<_, i64>(0))
        .unwrap() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_database_answers_resource_exhausted_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("full.db");
    daemon::start(dir.path(), &db, &[]).stop();
    let cap = page_count(&db) + 40;
    let capped = format!("max_pages = {cap}");

    // Arrange: a store capped 40 pages above its empty size, filled up.
    let daemon = daemon::start(dir.path(), &db, &[("store", &capped)]);
    daemon
        .ok(
            "agents",
            "create",
            json!({"agent": {"agentId": "a", "cwd": "/ws", "updatedAt": 1}}),
        )
        .await;
    let mut acked = fill(&daemon, "run", 0, 2000, 400, true).await;

    // Full: reads still work, other writes are refused the same way, nothing is damaged.
    assert_eq!(listed(&daemon, "run").await, acked.len());
    let big = json!({"agent": {"agentId": "b", "cwd": "/ws", "pad": "y".repeat(64 * 1024)}});
    let reply = daemon.call("agents", "create", big.clone()).await;
    assert_eq!(
        (reply.status, reply.connect_code().as_deref()),
        (429, Some("resource_exhausted"))
    );
    verify(&db, "run", &acked);

    // Space returns (1): restarted with a higher cap, everything acknowledged is there and
    // new writes succeed, continuing the seqs.
    assert!(daemon.stop().success());
    let raised = format!("max_pages = {}", cap * 4);
    let daemon = daemon::start(dir.path(), &db, &[("store", &raised)]);
    verify(&db, "run", &acked);
    daemon.ok("agents", "create", big).await;
    acked.extend(fill(&daemon, "run", 10_000, 2000, 2000, true).await);
    verify(&db, "run", &acked);

    // Space returns (2): deleting data frees pages for new writes, in the same process.
    daemon
        .ok(
            "runEvents",
            "delete",
            json!({"filter": {"runIds": ["run"]}}),
        )
        .await;
    let after = fill(&daemon, "run2", 0, 2000, 40, false).await;
    assert!(!after.is_empty(), "no append succeeded after the delete");
    verify(&db, "run2", &after);
    assert_eq!(
        daemon.ok("agents", "get", json!({"agentId": "a"})).await["cwd"],
        "/ws"
    );
    assert!(daemon.stop().success());
    assert_eq!(daemon::integrity(&db), "ok");
}

/// Whether a privilege these tests need must be there (as in CI), rather than skipped.
fn required() -> bool {
    let set = |v: &str| std::env::var(v).is_ok_and(|x| !x.is_empty() && x != "0" && x != "false");
    set("CI") || set("CALLBACKD_FAULTS_REQUIRED")
}

/// Says why a part of a test cannot run here: a failure where it must run, else `SKIPPED`.
fn skip(why: &str) {
    assert!(
        !required(),
        "this test must run here (CI or CALLBACKD_FAULTS_REQUIRED): {why}"
    );
    eprintln!("SKIPPED: {why}");
}

/// A tmpfs mounted for one test, unmounted on drop.
struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    /// `None` (after saying why) where mounting is not permitted; a failure where it must be.
    fn mount(path: &Path, options: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(path).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(path)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs {
                path: path.to_path_buf(),
            }),
            Ok(o) => {
                skip(&format!(
                    "cannot mount a tmpfs (needs root or CAP_SYS_ADMIN): {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
                None
            }
            Err(e) => {
                skip(&format!("cannot run mount: {e}"));
                None
            }
        }
    }

    fn remount(&self, options: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,{options}")])
            .arg(&self.path)
            .status()
            .unwrap();
        assert!(status.success(), "remount {options}");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.path)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.path).status();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_filesystem_answers_resource_exhausted_and_recovers_when_it_grows() {
    let dir = tempfile::tempdir().unwrap();
    let Some(fs) = Tmpfs::mount(&dir.path().join("mnt"), "size=512k,mode=0700") else {
        return;
    };
    let db = fs.path.join("tiny.db");
    let daemon = daemon::start(dir.path(), &db, &[]);
    let mut acked = fill(&daemon, "run", 0, 3000, 2000, true).await;
    assert!(!acked.is_empty());
    assert_eq!(listed(&daemon, "run").await, acked.len());

    // The filesystem grows: the same process takes writes again.
    fs.remount("size=8m");
    for i in 20_000..20_020 {
        let out = daemon
            .ok(
                "runEvents",
                "append",
                json!({"runId": "run", "eventType": "e", "payload": daemon::payload(i, 3000)}),
            )
            .await;
        acked.insert(i, out["seq"].as_u64().unwrap());
    }
    assert!(daemon.stop().success());
    verify(&db, "run", &acked);
    drop(fs);
}

/// Starts the daemon expecting it to refuse; returns its stderr.
fn refused(dir: &Path, db: &Path) -> String {
    let started = std::time::Instant::now();
    let failure = match daemon::try_start(dir, db, &[("store", "busy_timeout_ms = 200")]) {
        Ok(d) => {
            d.kill();
            panic!("callbackd started on {}", db.display());
        }
        Err(f) => f,
    };
    assert!(!failure.status.success());
    assert!(started.elapsed() < Duration::from_secs(10));
    eprintln!("refused as expected: {}", failure.stderr.trim());
    assert!(
        failure.stderr.contains(&db.display().to_string()),
        "the message names the file: {}",
        failure.stderr
    );
    failure.stderr
}

#[test]
fn a_locked_database_is_a_clear_startup_error() {
    let dir = tempfile::tempdir().unwrap();

    // A database of ours (WAL), write-locked by another process's open transaction.
    let db = dir.path().join("ours.db");
    daemon::start(dir.path(), &db, &[]).stop();
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let err = refused(dir.path(), &db);
    assert!(err.contains("locked by another process"), "{err}");
    holder.execute_batch("ROLLBACK").unwrap();
    drop(holder);

    // A fresh file (rollback journal) held exclusively while being written.
    let db = dir.path().join("fresh.db");
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder
        .execute_batch("BEGIN EXCLUSIVE; CREATE TABLE other (x)")
        .unwrap();
    let err = refused(dir.path(), &db);
    assert!(err.contains("locked by another process"), "{err}");
    drop(holder);

    // Once the lock is gone, the same file opens.
    daemon::start(dir.path(), &db, &[]).stop();
}

#[test]
fn a_read_only_database_is_a_clear_startup_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ro.db");
    daemon::start(dir.path(), &db, &[]).stop();

    // Root ignores file modes, so: the immutable attribute, where the filesystem has it.
    let immutable = Command::new("chattr").arg("+i").arg(&db).status();
    if immutable.is_ok_and(|s| s.success()) {
        /// Clears the attribute again even if the test fails, so the temp dir can go.
        struct Mutable<'a>(&'a Path);
        impl Drop for Mutable<'_> {
            fn drop(&mut self) {
                let _ = Command::new("chattr").arg("-i").arg(self.0).status();
            }
        }
        let guard = Mutable(&db);
        let err = refused(dir.path(), &db);
        drop(guard);
        assert!(err.contains("not writable"), "{err}");
    } else {
        skip("chattr +i (an immutable file) is not available here");
    }

    // And a read-only mount.
    let Some(fs) = Tmpfs::mount(&dir.path().join("mnt"), "size=1m,mode=0700") else {
        return;
    };
    let db = fs.path.join("ro.db");
    daemon::start(dir.path(), &db, &[]).stop();
    fs.remount("ro");
    let err = refused(dir.path(), &db);
    assert!(err.contains("not writable"), "{err}");
    assert!(err.contains("Read-only file system"), "{err}");
    drop(fs);
}

/// A daemon without root's privileges, its database's directory made read-only
/// (`chmod 0555`) and then unreadable too (`chmod 0444`): each a clear startup error naming
/// what it could not write or read. Root ignores file modes, so as root (as in CI) the daemon
/// runs as `nobody` (uid 65534); otherwise as the test's own user.
#[tokio::test]
async fn a_read_only_database_directory_is_a_clear_startup_error_without_root() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    // Reachable by the daemon's user: the config file and the database's directory in it.
    let mode = |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
    mode(dir.path(), 0o755).unwrap();
    let user = (std::fs::metadata(dir.path()).unwrap().uid() == 0).then_some(65534);
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    if let Some(id) = user {
        std::os::unix::fs::chown(&data, Some(id), Some(id)).unwrap();
    }
    /// Gives the directory back its modes even if the test fails, so the temp dir can go.
    struct Writable<'a>(&'a Path);
    impl Drop for Writable<'_> {
        fn drop(&mut self) {
            let _ = std::fs::set_permissions(self.0, std::fs::Permissions::from_mode(0o755));
        }
    }
    let _guard = Writable(&data);
    let db = data.join("ro.db");
    let start = || {
        daemon::try_start_as(
            dir.path(),
            &db,
            &[("store", "busy_timeout_ms = 200")],
            "",
            user,
        )
    };
    match start() {
        Ok(d) => {
            // A served call first: a stop at once after the ready line could come before the
            // daemon listens for SIGTERM, and leave its WAL behind.
            d.ok(
                "agents",
                "create",
                json!({"agent": {"agentId": "a", "cwd": "/ws"}}),
            )
            .await;
            let status = d.stop();
            assert!(status.success(), "{status}");
        }
        Err(f) => panic!("callbackd did not start as {user:?} (is the binary reachable?): {f:?}"),
    }

    // Read-only: the file is there and the daemon may read it, but it cannot write beside it
    // (SQLite's journal), so it refuses to start rather than serve reads and fail every write.
    mode(&data, 0o555).unwrap();
    let failure = start()
        .map(|d| d.kill())
        .expect_err("callbackd started in a read-only directory");
    assert!(!failure.status.success());
    let err = failure.stderr;
    assert!(
        err.contains(&db.display().to_string()),
        "names the file: {err}"
    );
    assert!(err.contains("not writable"), "{err}");

    // Neither writable nor searchable: the first file it needs there is named, with why.
    mode(&data, 0o444).unwrap();
    let failure = start()
        .map(|d| d.kill())
        .expect_err("callbackd started in an unreadable directory");
    assert!(!failure.status.success());
    let err = failure.stderr;
    assert!(
        err.contains(&data.display().to_string()),
        "names the path: {err}"
    );
    assert!(err.contains("Permission denied"), "{err}");
}

#[test]
fn a_file_that_is_not_a_database_is_a_clear_startup_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("notes.txt");
    std::fs::write(
        &db,
        "these are not the pages you are looking for\n".repeat(200),
    )
    .unwrap();
    let err = refused(dir.path(), &db);
    assert!(err.contains("not a database"), "{err}");
    // Untouched.
    assert!(std::fs::read_to_string(&db)
        .unwrap()
        .starts_with("these are not"));
}

#[test]
fn a_busy_port_is_a_clear_startup_error_and_creates_no_files() {
    let dir = tempfile::tempdir().unwrap();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap();
    let db = dir.path().join("callbackd.db");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_callbackd"))
        .arg("serve")
        .arg("--listen")
        .arg(addr.to_string())
        .arg("--db")
        .arg(&db)
        .env_remove("CALLBACKD_CONFIG")
        .env_remove("CALLBACKD_STORE_TOKEN")
        .env_remove("CALLBACKD_TOOL_TOKEN")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!("cannot listen on {addr}")),
        "{stderr}"
    );
    // No database, and no generated tokens file that a later start would silently reuse.
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn a_daemon_whose_log_reader_died_keeps_serving() {
    // stderr is a pipe whose reader is gone (a `| tee` that was killed, a restarted log
    // collector): every log line now fails with EPIPE. That must cost the log, not the daemon.
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let mut child = Command::new(env!("CARGO_BIN_EXE_callbackd"))
        .arg("serve")
        .arg("--listen")
        .arg(addr.to_string())
        .arg("--db")
        .arg(dir.path().join("callbackd.db"))
        .env_remove("CALLBACKD_CONFIG")
        .env("CALLBACKD_STORE_TOKEN", daemon::STORE_TOKEN)
        .env("CALLBACKD_TOOL_TOKEN", daemon::TOOL_TOKEN)
        .env("CALLBACKD_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());

    let get = Req::store(br#"{"substore":"agents","method":"get","input":{"agentId":"a"}}"#);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut answered = 0;
    while answered < 20 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "callbackd exited: {:?}",
            child.try_wait()
        );
        assert!(std::time::Instant::now() < deadline, "no answers");
        // Each answered call writes a log line to the dead pipe.
        if let Ok(mut conn) = daemon::Conn::open(addr).await {
            if let Ok(Some(reply)) = conn.send(&get.build()).await {
                assert_eq!(reply.status, 200, "{}", reply.text());
                answered += 1;
                continue;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(child.try_wait().unwrap().is_none(), "callbackd died");
    let _ = child.kill();
    let _ = child.wait();
}
