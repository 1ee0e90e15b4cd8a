//! The `callbackd` binary as a new user meets it: where it keeps its data with no config, how
//! `bridge-args` finds the daemon's tokens, what its messages say, and which namespace's rows
//! `backup`, `export` and `import --namespace` move.
//!
//! Every test runs the binary with a fresh `XDG_DATA_HOME` and `HOME` and without any
//! `CALLBACKD_*` variable, so nothing outside its temporary directories is read or written.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A scratch world: a home, a data home and a working directory, all empty.
struct World {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    xdg: PathBuf,
    cwd: PathBuf,
}

impl World {
    fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let [home, xdg, cwd] = ["home", "xdg", "work"].map(|d| tmp.path().join(d));
        for d in [&home, &cwd] {
            std::fs::create_dir(d).unwrap();
        }
        World {
            _tmp: tmp,
            home,
            xdg,
            cwd,
        }
    }

    /// `callbackd ARGS` in the working directory, with this world's environment.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_callbackd"));
        cmd.args(args)
            .current_dir(&self.cwd)
            .env("HOME", &self.home)
            .env("XDG_DATA_HOME", &self.xdg)
            .stdin(Stdio::null());
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("CALLBACKD_") {
                cmd.env_remove(k);
            }
        }
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn data_dir(&self) -> PathBuf {
        self.xdg.join("callbackd")
    }

    /// `callbackd serve --listen 127.0.0.1:0 ARGS`, once it printed its ready line.
    fn serve(&self, args: &[&str]) -> Daemon {
        let mut child = self
            .command(&[&["serve", "--listen", "127.0.0.1:0"], args].concat())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut daemon = Daemon {
            child,
            lines,
            seen: Vec::new(),
        };
        daemon.wait_line("callbackd ready ");
        daemon
    }
}

struct Daemon {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Daemon {
    /// The first stderr line (seen so far or coming) that contains `needle`.
    fn wait_line(&mut self, needle: &str) -> String {
        if let Some(line) = self.seen.iter().find(|l| l.contains(needle)) {
            return line.clone();
        }
        loop {
            match self.lines.recv_timeout(Duration::from_secs(20)) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => panic!("no line with {needle:?}; stderr so far: {:#?}", self.seen),
            }
        }
    }

    fn ready(&mut self) -> serde_json::Value {
        let line = self.wait_line("callbackd ready ");
        serde_json::from_str(line.split_once("callbackd ready ").unwrap().1).unwrap()
    }

    fn addr(&mut self) -> String {
        let url = self.ready()["url"].as_str().unwrap().to_string();
        url.trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// `store_token = "..."` of a tokens file.
fn token_in_file(file: &Path, key: &str) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let table: toml::Table = toml::from_str(&text).unwrap();
    table[key].as_str().unwrap().to_string()
}

#[test]
fn with_no_config_the_data_lives_in_the_data_directory_never_the_working_one() {
    let w = World::new();
    let mut daemon = w.serve(&[]);
    let db = w.data_dir().join("callbackd.db");
    // the path is printed at start
    assert_eq!(daemon.ready()["db"], db.to_str().unwrap());
    assert_eq!(
        daemon.ready()["store"],
        format!("database {}", db.display())
    );
    daemon.wait_line(&format!("database path={}", db.display()));
    assert!(db.exists());
    assert_eq!(mode(&w.data_dir()), 0o700, "the directory holds the tokens");
    assert_eq!(mode(&w.data_dir().join("callbackd.tokens")), 0o600);
    assert_eq!(
        std::fs::read_dir(&w.cwd).unwrap().count(),
        0,
        "nothing in the working directory"
    );
}

#[test]
fn without_xdg_data_home_the_data_is_under_home() {
    let w = World::new();
    let out = w
        .command(&["check-config"])
        .env_remove("XDG_DATA_HOME")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let expected = w.home.join(".local/share/callbackd/callbackd.db");
    assert!(
        stdout(&out).contains(&format!("database {},", expected.display())),
        "{}",
        stdout(&out)
    );
    assert!(
        !w.home.join(".local").exists(),
        "check-config creates nothing"
    );
}

#[test]
fn db_flag_and_config_still_choose_any_place() {
    let w = World::new();
    let mut daemon = w.serve(&["--db", "here/mine.db"]);
    assert_eq!(daemon.ready()["db"], "here/mine.db");
    drop(daemon);
    assert!(w.cwd.join("here/mine.db").exists());
    assert!(w.cwd.join("here/mine.tokens").exists());
    assert!(!w.data_dir().exists());

    std::fs::write(w.cwd.join("c.toml"), "[store]\npath = \"state/c.db\"\n").unwrap();
    let out = w.run(&["check-config", "--config", "c.toml"]);
    assert!(
        stdout(&out).contains(&format!("database {},", "state/c.db")),
        "{}",
        stdout(&out)
    );
}

#[test]
fn bridge_args_from_another_directory_prints_the_running_daemons_tokens() {
    let w = World::new();
    let mut daemon = w.serve(&[]);
    let addr = daemon.addr();
    let elsewhere = w.home.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let out = w
        .command(&["bridge-args", "--format", "json", "--listen", &addr])
        .current_dir(&elsewhere)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let args: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tokens = w.data_dir().join("callbackd.tokens");
    assert_eq!(
        args["storeCallbackAuthToken"],
        token_in_file(&tokens, "store_token")
    );
    assert_eq!(
        args["toolCallbackAuthToken"],
        token_in_file(&tokens, "tool_token")
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
}

#[test]
fn bridge_args_without_a_tokens_file_says_where_it_looked_and_generates_nothing() {
    let w = World::new();
    let out = w.run(&["bridge-args"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "no flags printed: {}", stdout(&out));
    let err = stderr(&out);
    let looked = w.data_dir().join("callbackd.tokens");
    assert!(
        err.contains(&format!("no tokens file at {}", looked.display())),
        "{err}"
    );
    assert!(
        err.contains("callbackd serve") && err.contains("callbackd run"),
        "{err}"
    );
    assert!(!w.data_dir().exists(), "nothing was created");
    assert_eq!(std::fs::read_dir(&w.cwd).unwrap().count(), 0);
}

#[test]
fn a_missing_config_file_is_reported_with_its_cause_once() {
    let w = World::new();
    let err = stderr(&w.run(&["check-config", "--config", "nope.toml"]));
    assert_eq!(
        err.trim_end(),
        format!(
            "callbackd: error: cannot read config file nope.toml: {}",
            std::io::Error::from_raw_os_error(2)
        )
    );
}

#[test]
fn a_toml_error_prints_its_block_once() {
    let w = World::new();
    std::fs::write(w.cwd.join("c.toml"), "[server]\nbogus = 1\n").unwrap();
    let err = stderr(&w.run(&["check-config", "--config", "c.toml"]));
    assert_eq!(err.matches("TOML parse error").count(), 1, "{err}");
    assert_eq!(err.matches("unknown field `bogus`").count(), 1, "{err}");
}

#[test]
fn check_config_refuses_a_webhook_secret_that_is_not_whsec_base64_naming_its_key() {
    let w = World::new();
    let hook = "[[webhooks]]\nurl = \"http://127.0.0.1:9/hook\"\n";
    std::fs::write(
        w.cwd.join("bad.toml"),
        format!("{hook}secret = \"hunter2\"\n"),
    )
    .unwrap();
    let err = stderr(&w.run(&["check-config", "--config", "bad.toml"]));
    assert!(
        err.contains("webhooks[0].secret") && err.contains("whsec_"),
        "{err}"
    );
    assert!(
        !err.contains("hunter2"),
        "the secret is never printed: {err}"
    );
    std::fs::write(w.cwd.join("s"), "whsec_c2hvcnQ=\n").unwrap();
    std::fs::write(
        w.cwd.join("file.toml"),
        format!("{hook}secret_file = \"s\"\n"),
    )
    .unwrap();
    let err = stderr(&w.run(&["check-config", "--config", "file.toml"]));
    assert!(
        err.contains("webhooks[0].secret_file") && err.contains("24 to 64"),
        "{err}"
    );
    let good = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    std::fs::write(
        w.cwd.join("ok.toml"),
        format!("{hook}secret = \"{good}\"\n"),
    )
    .unwrap();
    let out = w.run(&["check-config", "--config", "ok.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("webhooks 1"));
}

#[test]
fn a_bridge_that_does_not_exist_is_reported_with_its_cause_once() {
    let w = World::new();
    let err = stderr(&w.run(&["run", "--", "./no-such-bridge"]));
    let last = err.lines().last().unwrap_or_default();
    assert_eq!(
        last,
        format!(
            "callbackd: error: cannot start the bridge \"./no-such-bridge\": {}",
            std::io::Error::from_raw_os_error(2)
        ),
        "{err}"
    );
}

#[test]
fn check_config_prints_values_as_written_in_toml() {
    let w = World::new();
    std::fs::write(w.cwd.join("c.toml"), "[store]\nsync = \"full\"\n").unwrap();
    let out = w.run(&["check-config", "--config", "c.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("sync \"full\""), "{text}");
    assert!(text.contains("listen \"127.0.0.1:7420\""), "{text}");
    assert!(!text.contains("Full"), "{text}");
}

#[test]
fn healthcheck_says_so_in_one_line() {
    let w = World::new();
    let mut daemon = w.serve(&[]);
    let addr = daemon.addr();
    let out = w.run(&["healthcheck", "--listen", &addr]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), format!("healthy: {addr} answered /healthz\n"));
    drop(daemon);
    let out = w.run(&["healthcheck", "--listen", &addr]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("unhealthy"), "{}", stderr(&out));
}

#[test]
fn a_sigterm_right_after_the_ready_line_is_a_clean_stop() {
    // A supervisor may stop the daemon the moment it announced itself: that SIGTERM must
    // take the shutdown path (exit 0, "shutting down"), never the signal's default action.
    let w = World::new();
    let mut daemon = w.serve(&[]);
    let pid = nix::unistd::Pid::from_raw(daemon.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = daemon.child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "{status:?}; stderr: {:#?}",
        daemon.seen
    );
    daemon.wait_line("SIGTERM received, shutting down");
}

#[test]
fn a_store_call_refused_after_naming_its_call_is_logged_under_that_call() {
    let w = World::new();
    let mut daemon = w.serve(&[]);
    let addr = daemon.addr();
    let token = token_in_file(&w.data_dir().join("callbackd.tokens"), "store_token");
    let body = r#"{"substore":"agents","method":"get","input":{}}"#;
    let mut conn = TcpStream::connect(&addr).unwrap();
    write!(
        conn,
        "POST /sdk.v1.SdkStoreCallbackService/CallStore HTTP/1.1\r\nhost: x\r\n\
         authorization: Bearer {token}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    let line = daemon.wait_line("outcome=\"invalid_argument\"");
    assert!(line.contains("call=\"agents.get\""), "{line}");
}

#[test]
fn follow_finds_the_tokens_where_the_daemon_keeps_them_and_creates_none() {
    let w = World::new();
    let out = w.run(&["follow", "some-run"]);
    assert_eq!(out.status.code(), Some(1));
    let looked = w.data_dir().join("callbackd.tokens");
    assert!(
        stderr(&out).contains(&looked.display().to_string()),
        "{}",
        stderr(&out)
    );
    assert!(!w.data_dir().exists(), "nothing was created");
}

// `backup`, `export` and `import` with `--namespace`: each sees one namespace's rows only.

/// A webhook delivery for each approval held, the way the daemon's outbox records them.
struct OneDelivery;

impl callbackd::store::outbox::Composer for OneDelivery {
    fn compose(
        &self,
        happening: &callbackd::store::outbox::Happening<'_>,
    ) -> Vec<callbackd::store::outbox::OutboxEntry> {
        let callbackd::store::outbox::Happening::ApprovalRequired(rec) = happening else {
            return Vec::new();
        };
        vec![callbackd::store::outbox::OutboxEntry {
            id: format!("msg_{}", rec.id),
            url: "http://127.0.0.1:9/hook".into(),
            ns: rec.ns.as_str().to_string(),
            kind: "approval.required".into(),
            run_id: rec.run_id.clone(),
            body: serde_json::json!({"type": "approval.required", "data": {"id": rec.id}})
                .to_string(),
            created_at_ms: rec.created_at_ms,
        }]
    }
}

/// Every table with an `ns` column, in the order of the migrations.
const NS_TABLES: [&str; 13] = [
    "agents",
    "runs",
    "run_events",
    "checkpoints",
    "memory_notes",
    "tool_calls",
    "event_meta",
    "run_expiry",
    "approvals",
    "run_inputs",
    "session_forks",
    "ag_ui_threads",
    "webhook_outbox",
];

/// The same ids in every namespace, and `tag` in the stored text so the rows can be told
/// apart: per namespace an agent `same` (with a run, events, a blob, a memory note, a tool
/// call, a snapshot note, an approval with its webhook delivery and a fork record) and a finished run `old` whose events were pruned.
fn fill(db: &Path, namespaces: &[(&str, &str)]) {
    use callbackd::store::approvals::ApprovalRecord;
    use callbackd::store::records::{ToolCallStart, ToolOutcome};
    use callbackd::store::sqlite::{SqliteOptions, SqliteStore};
    use callbackd::{Namespace, Store, StoreCall};
    use serde_json::json;

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = std::sync::Arc::new(SqliteStore::open(&SqliteOptions::new(db)).unwrap());
        store.set_outbox(std::sync::Arc::new(OneDelivery));
        for (name, tag) in namespaces {
            let ns = Namespace::new(name);
            let call = |substore: &str, method: &str, input: serde_json::Value| {
                StoreCall::parse(substore, method, &input.to_string()).unwrap()
            };
            let agent = json!({
                "agentId": "same", "cwd": format!("/ws/{tag}"), "status": "idle",
                "activeRunId": null, "name": format!("agent of {tag}"),
                "createdAt": 1_780_000_000_000i64, "updatedAt": 1_780_000_000_000i64,
                "sdkMetadata": {"blobEncryptionKey": format!("key-of-{tag}")}
            });
            store
                .call(&ns, call("agents", "create", json!({ "agent": agent })))
                .await
                .unwrap();
            for (run_id, turn, status) in [("r1", 2, "running"), ("old", 1, "finished")] {
                let run = json!({
                    "runId": run_id, "requestId": null, "agentId": "same", "turnNumber": turn,
                    "status": status, "model": {"id": "composer-2"}, "result": null,
                    "error": null, "usageRef": null, "usage": null,
                    "createdAt": 1_000 + turn, "updatedAt": 1_000 + turn, "startedAt": null,
                    "endedAt": null, "startCheckpointRef": null, "latestCheckpointRef": null
                });
                store
                    .call(&ns, call("runs", "create", json!({ "run": run })))
                    .await
                    .unwrap();
                for i in 0..2 {
                    let event = json!({"runId": run_id, "eventType": "run_stream_event",
                                       "payload": {"text": format!("{tag} says {i}")}});
                    store
                        .call(&ns, call("runEvents", "append", event))
                        .await
                        .unwrap();
                }
            }
            store
                .call(
                    &ns,
                    call(
                        "checkpoints",
                        "create",
                        json!({"agentId": "same", "blobId": "b1", "data": "AAECAw=="}),
                    ),
                )
                .await
                .unwrap();
            let notes = store.tool_data();
            let note = format!("note of {tag}");
            notes.memory_set(&ns, "same", "k", &note, 10).await.unwrap();
            let records = store.clone().run_records();
            let start = ToolCallStart {
                agent_id: "same".into(),
                run_id: Some("r1".into()),
                tool_call_id: Some("tc1".into()),
                tool: "echo".into(),
                started_at_ms: 5,
            };
            // Held, approved with edited arguments, ended with its own result: every column
            // of the call's one account is filled, so a copy that drops one is seen.
            let id = records.tool_call_started(&ns, start, true).await.unwrap();
            let edited = serde_json::json!({"text": format!("edited by {tag}")});
            records.tool_call_resumed(id, Some(edited)).await.unwrap();
            let result = serde_json::json!({"echo": format!("result of {tag}")});
            records
                .tool_call_ended(id, ToolOutcome::Ok, false, 9, Some(result))
                .await
                .unwrap();
            records.snapshot_delta(&ns, "r1", 1, Some(3)).await.unwrap();
            let input = format!("prompt of {tag}");
            records.set_run_input(&ns, "r1", &input).await.unwrap();
            let approval = ApprovalRecord {
                id: format!("approval-of-{tag}"),
                ns: ns.clone(),
                agent_id: "same".into(),
                run_id: Some("r1".into()),
                tool: "echo".into(),
                tool_call_id: Some("tc1".into()),
                args: json!({"tag": tag}),
                created_at_ms: 5,
                expires_at_ms: 10,
                state: "pending".into(),
                decided_by: None,
                decided_at_ms: None,
                reason: None,
                owner: String::new(),
                lease_until_ms: 0,
                approved_args: None,
                confirm: false,
            };
            store
                .clone()
                .approval_records()
                .insert_approval(approval)
                .await
                .unwrap();
            let fork = callbackd::store::forks::ForkRecord {
                agent_id: "same".into(),
                source_agent_id: format!("source-of-{tag}"),
                source_run_id: "r0".into(),
                at: "after".into(),
                model: "composer-2".into(),
                tools: vec!["echo".into()],
                created_at_ms: 5,
            };
            store
                .clone()
                .fork_records()
                .insert_fork(&ns, fork)
                .await
                .unwrap();
            store
                .clone()
                .thread_records()
                .claim_thread(&ns, &format!("thread-of-{tag}"), "same", 5)
                .await
                .unwrap();
        }
        // Run `old` of every namespace is finished: its events go, run_expiry remembers them.
        let pruned = store.clone().run_records().prune_batch(i64::MAX, 100).await;
        assert_eq!(pruned.unwrap().runs, namespaces.len() as u64);
    });
}

/// Every row of namespace `ns`, by table, as text (without the `ns` column and the row ids
/// that differ between databases).
fn rows_of(db: &Path, ns: &str) -> Vec<(String, Vec<String>)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    NS_TABLES
        .iter()
        .map(|table| {
            let mut stmt = conn
                .prepare(&format!("SELECT * FROM {table} WHERE ns = ?1"))
                .unwrap();
            let columns: Vec<String> = stmt.column_names().map(str::to_string).collect();
            let mut rows: Vec<String> = stmt
                .query_map([ns], |r| {
                    let mut line = Vec::new();
                    for (i, column) in columns.iter().enumerate() {
                        if column == "ns" || (*table == "tool_calls" && column == "id") {
                            continue;
                        }
                        let value: rusqlite::types::Value = r.get(i)?;
                        line.push(format!("{column}={value:?}"));
                    }
                    Ok(line.join(" "))
                })
                .unwrap()
                .map(Result::unwrap)
                .collect();
            rows.sort();
            (table.to_string(), rows)
        })
        .collect()
}

/// The namespaces that have a row in any table.
fn namespaces_in(db: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let union: Vec<String> = NS_TABLES
        .iter()
        .map(|t| format!("SELECT ns FROM {t}"))
        .collect();
    let sql = format!(
        "SELECT DISTINCT ns FROM ({}) ORDER BY ns",
        union.join(" UNION ")
    );
    let mut stmt = conn.prepare(&sql).unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// Every file of an export directory, concatenated.
fn export_text(dir: &Path) -> String {
    ["agents", "runs", "run_events", "checkpoints"]
        .iter()
        .map(|f| std::fs::read_to_string(dir.join(format!("{f}.ndjson"))).unwrap())
        .collect()
}

#[test]
fn fill_writes_every_namespaced_table() {
    // Guards the tests below: a table they leave empty would prove nothing.
    let w = World::new();
    let db = w.cwd.join("src.db");
    fill(&db, &[("a", "alpha"), ("b", "beta")]);
    for ns in ["a", "b"] {
        for (table, rows) in rows_of(&db, ns) {
            assert!(!rows.is_empty(), "no {table} rows in namespace {ns}");
        }
    }
    let conn = rusqlite::Connection::open(&db).unwrap();
    let tables: Vec<String> = conn
        .prepare(
            "SELECT m.name FROM sqlite_schema m WHERE m.type = 'table' AND EXISTS \
             (SELECT 1 FROM pragma_table_info(m.name) WHERE name = 'ns') ORDER BY m.rowid",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        tables, NS_TABLES,
        "a namespaced table the tests do not know"
    );
}

#[test]
fn export_of_one_namespace_holds_its_data_only_and_names_it() {
    let w = World::new();
    let db = w.cwd.join("src.db");
    fill(&db, &[("a", "alpha"), ("b", "beta"), ("default", "deft")]);
    let db_arg = db.to_str().unwrap();

    let out = w.run(&["export", "--db", db_arg, "--namespace", "a", "out-a"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("namespace a: 1 agents, 2 runs, 2 run events, 1 checkpoint blobs"),
        "{}",
        stderr(&out)
    );
    let text = export_text(&w.cwd.join("out-a"));
    assert!(
        text.contains("alpha says 0") && text.contains("key-of-alpha"),
        "{text}"
    );
    for other in ["beta", "deft"] {
        assert!(!text.contains(other), "{other} in the export of a: {text}");
    }

    // Without --namespace: the default namespace, as before.
    let out = w.run(&["export", "--db", db_arg, "out-default"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("namespace default: "),
        "{}",
        stderr(&out)
    );
    let text = export_text(&w.cwd.join("out-default"));
    assert!(text.contains("deft says 1"), "{text}");
    assert!(!text.contains("alpha") && !text.contains("beta"), "{text}");
}

#[test]
fn import_into_another_namespace_leaves_every_other_one_as_it_was() {
    let w = World::new();
    let src = w.cwd.join("src.db");
    fill(&src, &[("a", "alpha"), ("b", "beta")]);
    let out = w.run(&[
        "export",
        "--db",
        src.to_str().unwrap(),
        "--namespace",
        "a",
        "out",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));

    // A second database whose namespaces a and b have the same ids as the export.
    let db = w.cwd.join("dest.db");
    fill(
        &db,
        &[
            ("a", "second-a"),
            ("b", "second-b"),
            ("default", "second-default"),
        ],
    );
    let others = ["a", "b", "default"];
    let before: Vec<_> = others.iter().map(|ns| rows_of(&db, ns)).collect();
    let db_arg = db.to_str().unwrap();
    let substores = |rows: Vec<(String, Vec<String>)>| -> Vec<(String, Vec<String>)> {
        rows.into_iter()
            .filter(|(t, _)| ["agents", "runs", "run_events", "checkpoints"].contains(&t.as_str()))
            .collect()
    };
    let src_a = substores(rows_of(&src, "a"));

    for replace in [false, true] {
        let mut args = vec!["import", "--db", db_arg, "--namespace", "c"];
        if replace {
            args.push("--replace");
        }
        args.push("out");
        let out = w.run(&args);
        assert!(out.status.success(), "replace {replace}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(
                "1 agents, 2 runs, 2 run events, 1 checkpoint blobs imported into namespace c of "
            ),
            "{}",
            stderr(&out)
        );
        // c has a's agents, runs, events and blobs, as they were in the first database.
        assert_eq!(substores(rows_of(&db, "c")), src_a, "replace {replace}");
        let after: Vec<_> = others.iter().map(|ns| rows_of(&db, ns)).collect();
        assert_eq!(
            after, before,
            "replace {replace}: another namespace changed"
        );
        assert_eq!(namespaces_in(&db), ["a", "b", "c", "default"]);
    }

    // Again without --replace: refused, since c has those ids now (and a's are not c's).
    let out = w.run(&["import", "--db", db_arg, "--namespace", "c", "out"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("--replace"), "{}", stderr(&out));

    // Without --namespace: into default, replacing default's agent and nothing of a, b or c.
    let c_before = rows_of(&db, "c");
    let out = w.run(&["import", "--db", db_arg, "--replace", "out"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("imported into namespace default of "),
        "{}",
        stderr(&out)
    );
    let agents_of_default = &rows_of(&db, "default")[0].1;
    assert!(
        agents_of_default[0].contains("key-of-alpha"),
        "{agents_of_default:?}"
    );
    assert_eq!(rows_of(&db, "a"), before[0]);
    assert_eq!(rows_of(&db, "b"), before[1]);
    assert_eq!(rows_of(&db, "c"), c_before);
}

#[test]
fn backup_of_one_namespace_holds_its_rows_only_and_passes_check() {
    let w = World::new();
    let db = w.cwd.join("src.db");
    fill(&db, &[("a", "alpha"), ("b", "beta"), ("default", "deft")]);
    let db_arg = db.to_str().unwrap();

    let out = w.run(&["backup", "--db", db_arg, "--namespace", "a", "a.db"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let copy = w.cwd.join("a.db");
    let kept = rows_of(&db, "a");
    let kept_rows: usize = kept.iter().map(|(_, r)| r.len()).sum();
    let all_rows: usize = ["a", "b", "default"]
        .iter()
        .flat_map(|ns| rows_of(&db, ns))
        .map(|(_, r)| r.len())
        .sum();
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "namespace a only: {kept_rows} rows kept (agents 1, runs 2, run_events 2, \
             checkpoints 1, memory_notes 1, tool_calls 1, event_meta 1, run_expiry 1, \
             approvals 1, run_inputs 1, session_forks 1, ag_ui_threads 1, webhook_outbox 1), {} rows of other namespaces left out",
            all_rows - kept_rows
        )),
        "{err}"
    );
    assert!(err.contains("quick_check ok"), "{err}");
    assert_eq!(namespaces_in(&copy), ["a"]);
    assert_eq!(rows_of(&copy, "a"), kept);
    // Nothing of the others anywhere in the file (free pages included), nor beside it.
    let bytes = std::fs::read(&copy).unwrap();
    assert!(contains(&bytes, "key-of-alpha"));
    for other in ["beta", "deft"] {
        assert!(!contains(&bytes, other), "{other} is in the file");
    }
    let names: Vec<String> = std::fs::read_dir(&w.cwd)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("a.db") || n.contains(".tmp"))
        .collect();
    assert_eq!(names, ["a.db"]);
    assert_eq!(mode(&copy), 0o600);
    // The source is untouched.
    assert_eq!(namespaces_in(&db), ["a", "b", "default"]);

    let out = w.run(&["check", "--db", "a.db"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("integrity_check: ok; checkpoint blobs: 1 checked, 0 corrupt"),
        "{}",
        stdout(&out)
    );

    // A namespace without rows: a valid, empty backup that says so.
    let out = w.run(&[
        "backup",
        "--db",
        db_arg,
        "--namespace",
        "nobody",
        "empty.db",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("namespace nobody only: 0 rows kept"),
        "{}",
        stderr(&out)
    );
    assert!(namespaces_in(&w.cwd.join("empty.db")).is_empty());
    let out = w.run(&["check", "--db", "empty.db"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
}

#[test]
fn backup_without_namespace_is_still_the_whole_database() {
    let w = World::new();
    let db = w.cwd.join("src.db");
    fill(&db, &[("a", "alpha"), ("b", "beta"), ("default", "deft")]);
    let out = w.run(&["backup", "--db", db.to_str().unwrap(), "all.db"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("rows kept"), "{}", stderr(&out));
    let copy = w.cwd.join("all.db");
    assert_eq!(namespaces_in(&copy), ["a", "b", "default"]);
    for ns in ["a", "b", "default"] {
        assert_eq!(rows_of(&copy, ns), rows_of(&db, ns), "namespace {ns}");
    }
    let help = stdout(&w.run(&["backup", "--help"]));
    assert!(
        help.contains("Without it the copy is the whole database"),
        "{help}"
    );
}

#[test]
fn a_bad_namespace_name_is_refused_naming_the_flag_and_nothing_is_written() {
    let w = World::new();
    let db = w.cwd.join("src.db");
    fill(&db, &[("a", "alpha")]);
    let db_arg = db.to_str().unwrap();
    let out = w.run(&["export", "--db", db_arg, "--namespace", "a", "out"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let before = rows_of(&db, "a");
    let long = "a".repeat(64);
    for bad in ["", "Alice", "-a", "a/b", "a b", long.as_str()] {
        // `--namespace=-a`: as a separate word, clap takes `-a` for a flag.
        let flag = format!("--namespace={bad}");
        for args in [
            ["backup", "--db", db_arg, &flag, "copy.db"],
            ["export", "--db", db_arg, &flag, "new-dir"],
            ["import", "--db", db_arg, &flag, "out"],
        ] {
            let out = w.run(&args);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert!(
                err.contains(&format!("invalid value '{bad}' for '--namespace <NAME>'"))
                    && err.contains("a namespace name is 1 to 63 characters of a-z, 0-9"),
                "{args:?}: {err}"
            );
        }
    }
    assert!(!w.cwd.join("copy.db").exists());
    assert!(!w.cwd.join("new-dir").exists());
    assert_eq!(namespaces_in(&db), ["a"]);
    assert_eq!(rows_of(&db, "a"), before);
    // The longest name is fine.
    let longest = "z".repeat(63);
    let out = w.run(&["export", "--db", db_arg, "--namespace", &longest, "new-dir"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

// Namespaces: reload without a restart, `callbackd namespaces`, `bridge-args --namespace`.

/// The status of a request to the daemon at `addr`, with `token` as bearer.
fn status_of(addr: &str, method: &str, path: &str, token: &str, body: &str) -> u16 {
    let mut conn = TcpStream::connect(addr).unwrap();
    write!(
        conn,
        "{method} {path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"))
}

const STORE: &str = "/sdk.v1.SdkStoreCallbackService/CallStore";
const LIST: &str = r#"{"substore":"agents","method":"list","input":{}}"#;

fn namespace_toml(name: &str, version: u32, extra: &str) -> String {
    format!(
        "[[namespaces]]\nname = \"{name}\"\nstore_token = \"{name}-store-v{version}-0123456789\"\n\
         tool_token = \"{name}-tool-v{version}-0123456789\"\n{extra}\n"
    )
}

#[test]
fn sighup_and_a_changed_token_file_reload_the_namespaces_without_a_restart() {
    let w = World::new();
    let config = w.cwd.join("callbackd.toml");
    let base = "[store]\npath = \"data/callbackd.db\"\n";
    std::fs::write(w.cwd.join("a.api"), "a-api-v1-0123456789\n").unwrap();
    let a = namespace_toml("a", 1, "api_token_file = \"a.api\"");
    // Step 2's config adds b: padded to its size now, so that it can be written unseen by the
    // poll (which compares sizes and modification times).
    let b = namespace_toml("b", 1, "");
    let pad = format!("#{}\n", "-".repeat(b.len() - 2));
    std::fs::write(&config, format!("{base}{a}{pad}")).unwrap();
    let mut daemon = w.serve(&["--config", config.to_str().unwrap()]);
    let addr = daemon.addr();
    let pid = nix::unistd::Pid::from_raw(daemon.child.id() as i32);
    assert_eq!(
        status_of(&addr, "GET", "/v1/sessions", "a-api-v1-0123456789", ""),
        200
    );

    // 1. The token file changes: the daemon notices on its own.
    std::fs::write(w.cwd.join("a.api"), "a-api-v2-0123456789\n").unwrap();
    daemon.wait_line("a token file changed");
    daemon.wait_line("reloaded namespaces and tokens");
    assert_eq!(
        status_of(&addr, "GET", "/v1/sessions", "a-api-v1-0123456789", ""),
        401
    );
    assert_eq!(
        status_of(&addr, "GET", "/v1/sessions", "a-api-v2-0123456789", ""),
        200
    );

    // 2. SIGHUP alone: the config gains a namespace and rotates a's store token, but keeps
    // its size and modification time, so the poll cannot see the change; and the reload
    // must come sooner than the poll's interval.
    let a2 = namespace_toml("a", 2, "api_token_file = \"a.api\"");
    let before = std::fs::metadata(&config).unwrap();
    let text = format!("{base}{a2}{b}");
    assert_eq!(text.len() as u64, before.len());
    // Written aside and renamed over it: the poll never sees a moment with another stamp.
    let aside = w.cwd.join("callbackd.toml.new");
    std::fs::write(&aside, &text).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&aside)
        .unwrap()
        .set_modified(before.modified().unwrap())
        .unwrap();
    std::fs::rename(&aside, &config).unwrap();
    let after = std::fs::metadata(&config).unwrap();
    assert_eq!(
        (after.len(), after.modified().unwrap()),
        (before.len(), before.modified().unwrap()),
        "the poll would see the write"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        status_of(&addr, "POST", STORE, "b-store-v1-0123456789", LIST),
        401,
        "b got in before the SIGHUP"
    );
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    let sent = std::time::Instant::now();
    let within = callbackd::app::reload::POLL * 3 / 4;
    while status_of(&addr, "POST", STORE, "b-store-v1-0123456789", LIST) != 200 {
        assert!(
            sent.elapsed() < within,
            "b did not get in within {within:?} of the SIGHUP: {:#?}",
            daemon.seen
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    daemon.wait_line("SIGHUP: reloading namespaces and tokens");
    assert_eq!(
        status_of(&addr, "POST", STORE, "a-store-v1-0123456789", LIST),
        401
    );
    assert_eq!(
        status_of(&addr, "POST", STORE, "a-store-v2-0123456789", LIST),
        200
    );
    assert!(
        daemon.child.try_wait().unwrap().is_none(),
        "SIGHUP did not stop the daemon"
    );

    // 3. An invalid config (b's tool token is a's store token) is refused whole.
    let clash = namespace_toml("b", 1, "").replace("b-tool-v1", "a-store-v2");
    std::fs::write(&config, format!("{base}{a2}{clash}")).unwrap();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    let refused = daemon.wait_line("reload refused");
    assert!(refused.contains("namespaces[b].tool_token"), "{refused}");
    assert_eq!(
        status_of(&addr, "POST", STORE, "b-store-v1-0123456789", LIST),
        200
    );
    assert_eq!(
        status_of(&addr, "POST", STORE, "a-store-v2-0123456789", LIST),
        200
    );
}

#[test]
fn namespaces_prints_each_namespaces_usage_against_its_quotas() {
    let w = World::new();
    let db = w.cwd.join("data.db");
    fill(&db, &[("a", "tag-a"), ("b", "tag-b")]);
    let config = w.cwd.join("c.toml");
    let a = namespace_toml(
        "a",
        1,
        "[namespaces.quotas]\nmax_agents = 5\nmax_stored_bytes = 1000000",
    );
    let c = namespace_toml("c", 1, "");
    std::fs::write(&config, format!("[store]\npath = \"data.db\"\n{a}{c}")).unwrap();
    let out = w.run(&["namespaces", "--config", config.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let line = |ns: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(ns))
            .unwrap_or_else(|| panic!("no line for {ns}: {text}"))
            .to_string()
    };
    assert!(line("a").contains("1/5"), "{text}");
    assert!(line("b").contains("(not configured)"), "{text}");
    assert!(line("c").split_whitespace().nth(1) == Some("0"), "{text}");
    let out = w.run(&["namespaces", "--json", "--config", config.to_str().unwrap()]);
    let rows: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let a = rows.iter().find(|r| r["namespace"] == "a").unwrap();
    assert_eq!(a["agents"], 1);
    assert_eq!(a["configured"], true);
    assert_eq!(a["quotas"]["max_agents"], 5);
    assert!(a["stored_bytes"].as_u64().unwrap() > 0, "{a}");
    assert!(rows
        .iter()
        .any(|r| r["namespace"] == "b" && r["configured"] == false));
}

#[test]
fn bridge_args_of_a_namespace_are_its_own_tokens() {
    let w = World::new();
    let config = w.cwd.join("c.toml");
    let a = namespace_toml("a", 1, "");
    std::fs::write(
        &config,
        format!("[server]\nlisten = \"127.0.0.1:7999\"\n[store]\npath = \"x.db\"\n{a}"),
    )
    .unwrap();
    let c = config.to_str().unwrap();
    let out = w.run(&[
        "bridge-args",
        "--config",
        c,
        "--namespace",
        "a",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let args: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let text = args.to_string();
    assert!(
        text.contains("a-store-v1-0123456789") && text.contains("a-tool-v1-0123456789"),
        "{text}"
    );
    let out = w.run(&["bridge-args", "--config", c, "--namespace", "zz"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("namespace \"zz\" is not configured"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("[[namespaces]] has a"),
        "names the configured ones: {}",
        stderr(&out)
    );
}

#[test]
fn check_config_checks_the_namespaces_as_the_daemon_would() {
    let w = World::new();
    let config = w.cwd.join("c.toml");
    let good = namespace_toml("a", 1, "tools = [\"echo\"]");
    std::fs::write(&config, format!("[store]\npath = \"x.db\"\n{good}")).unwrap();
    let c = config.to_str().unwrap();
    let out = w.run(&["check-config", "--config", c]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("namespaces 2"), "{}", stdout(&out));
    let bad = namespace_toml("a", 1, "tools = [\"no-such-tool\"]");
    std::fs::write(&config, format!("[store]\npath = \"x.db\"\n{bad}")).unwrap();
    let out = w.run(&["check-config", "--config", c]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("namespaces[a].tools"),
        "{}",
        stderr(&out)
    );
    let zero = namespace_toml("a", 1, "[namespaces.quotas]\nmax_agents = 0");
    std::fs::write(&config, format!("[store]\npath = \"x.db\"\n{zero}")).unwrap();
    let out = w.run(&["check-config", "--config", c]);
    assert!(
        stderr(&out).contains("namespaces[a].quotas.max_agents"),
        "{}",
        stderr(&out)
    );
    assert!(!w.cwd.join("x.db").exists(), "check-config writes nothing");
}

#[test]
fn client_commands_take_a_namespaces_api_token_from_the_config() {
    let w = World::new();
    let config = w.cwd.join("c.toml");
    let a = namespace_toml("a", 1, "api_token = \"a-api-v1-0123456789\"");
    std::fs::write(&config, format!("[store]\npath = \"x.db\"\n{a}")).unwrap();
    let c = config.to_str().unwrap();
    let mut daemon = w.serve(&["--config", c]);
    let addr = daemon.addr();
    let create = r#"{"substore":"agents","method":"create","input":{"agent":{"agentId":"agent-of-a","cwd":"/a","status":"idle","activeRunId":null,"name":"A","createdAt":1,"updatedAt":1}}}"#;
    assert_eq!(
        status_of(&addr, "POST", STORE, "a-store-v1-0123456789", create),
        200
    );
    let url = format!("http://{addr}/");
    let out = w.run(&["sessions", "--url", &url, "--namespace", "a", "--config", c]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("agent-of-a"), "{}", stdout(&out));
    let out = w.run(&["sessions", "--url", &url, "--config", c]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !stdout(&out).contains("agent-of-a"),
        "the default namespace: {}",
        stdout(&out)
    );
    let out = w.run(&[
        "sessions",
        "--url",
        &url,
        "--namespace",
        "zz",
        "--config",
        c,
    ]);
    assert!(
        stderr(&out).contains("namespace \"zz\" is not configured"),
        "{}",
        stderr(&out)
    );
}

// Day-to-day operation as a user meets it (issue 24): a closed stdout, shell completions and
// the man page, safe pruning.

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `callbackd ARGS | head -0`: the reader is gone before the first write.
fn with_closed_stdout(world: &World, args: &[&str]) -> (Option<i32>, String) {
    let mut child = world
        .command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (out.status.code(), text(&out.stderr))
}

#[test]
fn a_closed_stdout_ends_every_printing_command_quietly() {
    let world = World::new();
    for args in [
        &["tools", "export"][..],
        &["print-config"],
        &["completions", "bash"],
        &["man"],
    ] {
        let (code, stderr) = with_closed_stdout(&world, args);
        assert!(
            matches!(code, Some(0) | Some(141)),
            "{args:?}: exit {code:?}, stderr {stderr}"
        );
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn completions_for_each_shell_and_the_man_page_describe_the_real_commands() {
    let world = World::new();
    for shell in ["bash", "zsh", "fish"] {
        let out = world.run(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
        let script = text(&out.stdout);
        for word in ["sessions", "prune", "--older-than", "bridge-args"] {
            assert!(script.contains(word), "{shell} completion lacks {word}");
        }
    }
    let bad = world.run(&["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("bash"), "{}", text(&bad.stderr));

    let man = world.run(&["man"]);
    assert!(man.status.success());
    let roff = text(&man.stdout);
    assert!(
        roff.starts_with(".ie") || roff.starts_with(".TH"),
        "{roff:.200}"
    );
    assert!(roff.contains(".TH callbackd 1"));
    for section in ["CALLBACKD PRUNE", "CALLBACKD SESSIONS", "CALLBACKD RUN"] {
        assert!(roff.contains(section), "man page lacks {section}");
    }
    assert!(
        !roff.contains("CALLBACKD WATCHDOG"),
        "hidden command documented"
    );
    // bash's completion script is valid bash.
    if let Ok(status) = Command::new("bash")
        .arg("-n")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            let out = world.run(&["completions", "bash"]);
            c.stdin.take().unwrap().write_all(&out.stdout)?;
            c.wait()
        })
    {
        assert!(status.success(), "bash -n rejects the completion script");
    }
}

/// A database with `runs` finished runs of `events` events each (payloads of 2 KiB), created
/// as the daemon creates it.
fn database_with_finished_runs(db: &std::path::Path, runs: usize, events: usize) {
    use callbackd::store::sqlite::{SqliteOptions, SqliteStore};
    use callbackd::{Namespace, Store, StoreCall};
    use serde_json::json;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(&SqliteOptions::new(db)).unwrap();
        let ns = Namespace::default();
        let call = |substore: &str, method: &str, input: serde_json::Value| {
            StoreCall::parse(substore, method, &input.to_string()).unwrap()
        };
        let agent = json!({
            "agentId": "a1", "cwd": "/ws", "status": "idle", "activeRunId": null,
            "name": "agent", "createdAt": 1, "updatedAt": 1
        });
        store
            .call(&ns, call("agents", "create", json!({ "agent": agent })))
            .await
            .unwrap();
        for r in 0..runs {
            let run_id = format!("run-{r}");
            let run = json!({
                "runId": run_id, "requestId": null, "agentId": "a1", "turnNumber": r + 1,
                "status": "finished", "model": {"id": "m"}, "result": null, "error": null,
                "usageRef": null, "usage": null, "createdAt": 1000, "updatedAt": 1000,
                "startedAt": 1000, "endedAt": 1000, "startCheckpointRef": null,
                "latestCheckpointRef": null
            });
            store
                .call(&ns, call("runs", "create", json!({ "run": run })))
                .await
                .unwrap();
            for i in 0..events {
                let event = json!({"runId": run_id, "eventType": "run_stream_event",
                                   "payload": {"i": i, "text": "x".repeat(2048)}});
                store
                    .call(&ns, call("runEvents", "append", event))
                    .await
                    .unwrap();
            }
        }
    });
}

fn event_count(db: &std::path::Path) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("SELECT count(*) FROM run_events", [], |r| r.get(0))
        .unwrap()
}

/// The number just before `word` in `text` ("(200 events," -> 200).
fn number_before(text: &str, word: &str) -> u64 {
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .windows(2)
        .find_map(|w| {
            (w[1].trim_matches(|c: char| !c.is_alphanumeric()) == word)
                .then(|| {
                    w[0].trim_matches(|c: char| !c.is_ascii_digit())
                        .parse()
                        .ok()
                })
                .flatten()
        })
        .unwrap_or_else(|| panic!("no number before {word:?} in {text}"))
}

#[test]
fn prune_dry_run_changes_nothing_and_prune_gives_the_space_back() {
    let world = World::new();
    let db = world.cwd.join("callbackd.db");
    database_with_finished_runs(&db, 5, 40);
    let db_arg = db.to_str().unwrap();
    assert_eq!(event_count(&db), 200);

    let out = world.run(&["prune", "--db", db_arg, "--older-than", "0s", "--dry-run"]);
    let text = text(&out.stdout);
    assert!(out.status.success(), "{}", self::text(&out.stderr));
    assert!(text.starts_with("would remove"), "{text}");
    assert_eq!(number_before(&text, "runs"), 5, "{text}");
    assert_eq!(number_before(&text, "events"), 200, "{text}");
    assert!(number_before(&text, "payload") > 200 * 2048, "{text}");
    assert_eq!(event_count(&db), 200, "a dry run removed events");

    // Not on a terminal and without --yes: scripts that call prune keep working.
    let out = world.run(&["prune", "--db", db_arg, "--older-than", "0s"]);
    let text = self::text(&out.stdout);
    assert!(out.status.success(), "{}", self::text(&out.stderr));
    assert_eq!(event_count(&db), 0);
    // "database B bytes -> A bytes (file and WAL)": the WAL counts, and the space came back.
    let sizes: Vec<u64> = text
        .split("database ")
        .nth(1)
        .unwrap_or_else(|| panic!("{text}"))
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert!(sizes.len() >= 2, "{text}");
    assert!(sizes[0] > 200 * 2048, "before counts the WAL: {text}");
    assert!(sizes[1] < sizes[0] / 2, "the file did not shrink: {text}");
    assert!(text.contains("file and WAL"), "{text}");

    // `namespaces` reports the database's size with its WAL too.
    let out = world.run(&["namespaces", "--db", db_arg]);
    let text = self::text(&out.stdout);
    assert!(out.status.success(), "{}", self::text(&out.stderr));
    assert!(text.contains("bytes (file and WAL)"), "{text}");
}

/// `prune` removes the webhooks' settled deliveries of the same age too (the daemon's worker
/// does it hourly; a database pruned by hand must not keep an outbox its runs no longer
/// have), and never one still pending.
#[test]
fn prune_removes_settled_webhook_deliveries_and_keeps_pending_ones() {
    let world = World::new();
    let db = world.cwd.join("callbackd.db");
    database_with_finished_runs(&db, 1, 2);
    let conn = rusqlite::Connection::open(&db).unwrap();
    for (id, state) in [("d1", "delivered"), ("d2", "failed"), ("d3", "pending")] {
        conn.execute(
            "INSERT INTO webhook_outbox (id, url, ns, type, body, created_at, state, next_at) \
             VALUES (?1, 'http://127.0.0.1:9/h', 'default', 'run.ended', '{}', 1000, ?2, 0)",
            (id, state),
        )
        .unwrap();
    }
    let out = world.run(&["prune", "--db", db.to_str().unwrap(), "--older-than", "0s"]);
    let text = text(&out.stdout);
    assert!(out.status.success(), "{}", self::text(&out.stderr));
    assert!(
        text.contains("removed 2 settled webhook deliveries"),
        "{text}"
    );
    let left: Vec<String> = conn
        .prepare("SELECT id FROM webhook_outbox")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(left, ["d3"]);
}

/// Issue 24: on a terminal, without `--yes`, prune shows what it would remove and asks;
/// anything but yes removes nothing (and says so, non-zero), yes removes it.
#[test]
fn prune_on_a_terminal_asks_and_removes_only_on_yes() {
    let world = World::new();
    let db = world.cwd.join("callbackd.db");
    database_with_finished_runs(&db, 3, 10);
    let db_arg = db.to_str().unwrap();

    for (answer, removes) in [("n", false), ("", false), ("yes", true)] {
        let (status, screen, stdout) = prune_on_a_terminal(
            &world,
            &["prune", "--db", db_arg, "--older-than", "0s"],
            answer,
        );
        assert!(
            screen.contains("remove the events of 3 runs (30 events") && screen.contains("[y/N]"),
            "answer {answer:?}: the question shows what would go: {screen}"
        );
        if removes {
            assert!(status.success(), "answer {answer:?}: {screen} {stdout}");
            assert!(stdout.contains("pruned the events of 3 runs"), "{stdout}");
            assert_eq!(event_count(&db), 0);
        } else {
            assert!(!status.success(), "answer {answer:?} must fail: {screen}");
            assert!(
                screen.contains("not pruned: the answer was not yes"),
                "{screen}"
            );
            assert_eq!(event_count(&db), 30, "answer {answer:?} removed events");
        }
    }
}

/// Runs `args` with stdin and stderr on a pseudo-terminal, answers `answer` once the
/// question `[y/N]` shows, and returns the exit status, what the terminal showed and stdout.
fn prune_on_a_terminal(
    world: &World,
    args: &[&str],
    answer: &str,
) -> (std::process::ExitStatus, String, String) {
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let mut child = world
        .command(args)
        .stdin(Stdio::from(pty.slave.try_clone().unwrap()))
        .stderr(Stdio::from(pty.slave))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut master = std::fs::File::from(pty.master);
    let mut writer = master.try_clone().unwrap();
    // The terminal's output, read on a thread (a pty read blocks; it ends with EIO once the
    // child has exited and closed its side).
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut screen = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut answered = false;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left.min(Duration::from_millis(200))) {
            Ok(bytes) => screen.extend(bytes),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // The terminal closed: the child is exiting.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        if !answered && String::from_utf8_lossy(&screen).contains("[y/N]") {
            writer.write_all(format!("{answer}\n").as_bytes()).unwrap();
            answered = true;
        }
        if let Some(status) = child.try_wait().unwrap() {
            // What is still on its way from the terminal.
            while let Ok(bytes) = rx.recv_timeout(Duration::from_millis(100)) {
                screen.extend(bytes);
            }
            let mut stdout = String::new();
            child
                .stdout
                .take()
                .unwrap()
                .read_to_string(&mut stdout)
                .unwrap();
            return (
                status,
                String::from_utf8_lossy(&screen).into_owned(),
                stdout,
            );
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            panic!(
                "prune did not finish (answered: {answered}): {}",
                String::from_utf8_lossy(&screen)
            );
        }
    }
}

/// Issue 24: `print-config` is the whole reference, and the example file is exactly it; the
/// printed file is a configuration `check-config` accepts as it is.
#[test]
fn print_config_is_the_example_file_and_a_valid_configuration() {
    let world = World::new();
    let out = world.run(&["print-config"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    let example = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("config/callbackd.example.toml"),
    )
    .unwrap();
    assert!(
        printed == example,
        "config/callbackd.example.toml differs from `callbackd print-config`: regenerate it"
    );
    for section in [
        "[server]",
        "[auth]",
        "[store]",
        "[tools]",
        "[log]",
        "[api]",
        "[bridge]",
        "[retention]",
        "[metrics]",
        "# [[namespaces]]",
    ] {
        assert!(
            printed.contains(&format!("\n{section}\n")),
            "{section} missing"
        );
    }
    std::fs::write(world.cwd.join("printed.toml"), &printed).unwrap();
    let out = world.run(&["check-config", "--config", "printed.toml"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn the_help_of_url_names_the_runtime_file_and_no_empty_environment_value() {
    let w = World::new();
    let out = w.run(&["sessions", "--help"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let help = stdout(&out);
    assert!(help.contains("runtime file"), "{help}");
    assert!(help.contains("[env: CALLBACKD_URL]"), "{help}");
    assert!(!help.contains("CALLBACKD_URL="), "{help}");
    assert!(!help.contains("CALLBACKD_CONFIG="), "{help}");
}
