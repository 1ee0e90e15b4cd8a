//! Day-to-day operation of the `callbackd` binary, as a user meets it: a closed stdout,
//! shell completions and the man page, finding the running daemon, safe pruning.
//!
//! Every test runs the binary with a fresh `XDG_DATA_HOME` and `HOME` and without any
//! `CALLBACKD_*` variable, so nothing outside its temporary directories is read or written.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

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
}

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
