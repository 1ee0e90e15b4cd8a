//! `callbackd run -- <bridge>` against a fake bridge: a POSIX sh script that behaves like the
//! real one where it matters here. It prints `cursor-sdk-bridge ready {json}` on stderr,
//! records its argv, environment and pids, keeps a child process (as node under the real
//! `bin/cursor-sdk-bridge` wrapper), and reacts to signals as `FAKE_MODE` says.
//!
//! The scripts are run as `/bin/sh <script>` rather than executed, so no test can hit
//! ETXTBSY from a sibling test forking while a script is still open for writing.
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

const STORE_TOKEN: &str = "store-token-for-the-supervisor-test";
const TOOL_TOKEN: &str = "tool-token-for-the-supervisor-test";

/// The "node" process: does the bridge's work. Modes:
/// `serve` (default): on INT/TERM, records the signal, takes 0.3 s to shut down, exits 0;
/// `exit3`: exits 3 right after the ready line; `selfkill`: dies of SIGUSR1;
/// `early`: exits 3 before its ready line, saying why on stderr;
/// `straggler`: on TERM exits at once, leaving a child that ignores TERM;
/// `ignore`: ignores TERM altogether.
const FAKE_NODE: &str = r#"
d="$FAKE_DIR"
printf '%s\n' "$@" > "$d/argv"
env > "$d/env"
echo $$ > "$d/node.pid"
mkdir -p "$d/tmp/cursor-sdk-bridge-test"
echo secret > "$d/tmp/cursor-sdk-bridge-test/auth-token"
mode="${FAKE_MODE:-serve}"
case "$mode" in
  ignore) trap '' TERM ;;
  straggler) trap 'sh -c "trap \"\" TERM; exec sleep 1000" & echo $! > "$d/straggler.pid"; exit 0' TERM ;;
  *) trap 'echo INT > "$d/got"; sleep 0.3; kill $kid 2>/dev/null; echo done > "$d/done"; exit 0' INT
     trap 'echo TERM > "$d/got"; sleep 0.3; kill $kid 2>/dev/null; echo done > "$d/done"; exit 0' TERM ;;
esac
sleep 1000 &
kid=$!
echo $kid > "$d/kid.pid"
echo "fake bridge starting" >&2
if [ "$mode" = early ]; then echo "Error: TMPDIR is not set" >&2; kill $kid; exit 3; fi
printf 'cursor-sdk-bridge ready {"url":"%s","pid":%s,"authTokenFile":"%s"}\n' \
  "$FAKE_BRIDGE_URL" $$ "$d/tmp/cursor-sdk-bridge-test/auth-token" >&2
echo "after ready" >&2
case "$mode" in
  exit3) kill $kid; exit 3 ;;
  selfkill) kill $kid; kill -USR1 $$ ;;
esac
while :; do wait $kid; done
"#;

#[path = "common/fake_ping.rs"]
mod fake_ping;
use fake_ping::fake_bridge_url;

/// Like `bin/cursor-sdk-bridge`: runs "node" as a child (no exec) and exits with its status.
const FAKE_WRAPPER: &str = r#"
echo $$ > "$FAKE_DIR/wrapper.pid"
/bin/sh "$FAKE_DIR/node.sh" "$@"
"#;

struct Run {
    child: Child,
    dir: tempfile::TempDir,
    lines: mpsc::Receiver<String>,
    stderr: Vec<String>,
}

struct Opts<'a> {
    mode: &'a str,
    wrapper: bool,
    /// `--db`; default: a file in the test's directory.
    db: Option<PathBuf>,
    bridge_args: Vec<&'a str>,
    /// Close our end of callbackd's stderr pipe at once (a log reader that died).
    broken_stderr: bool,
}

impl Default for Opts<'_> {
    fn default() -> Self {
        Opts {
            mode: "serve",
            wrapper: false,
            db: None,
            bridge_args: vec!["--port", "0"],
            broken_stderr: false,
        }
    }
}

impl Run {
    fn start(opts: Opts) -> Run {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("node.sh"), FAKE_NODE).unwrap();
        std::fs::write(d.join("wrapper.sh"), FAKE_WRAPPER).unwrap();
        let script = if opts.wrapper {
            "wrapper.sh"
        } else {
            "node.sh"
        };
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_callbackd"));
        cmd.arg("run")
            .arg("--db")
            .arg(opts.db.unwrap_or_else(|| d.join("callbackd.db")))
            .arg("--ready-file")
            .arg(d.join("ready.json"))
            .arg("--stop-timeout")
            .arg("2")
            .arg("--")
            .arg("/bin/sh")
            .arg(d.join(script))
            .args(&opts.bridge_args)
            .env("FAKE_DIR", d)
            .env("FAKE_MODE", opts.mode)
            .env("FAKE_BRIDGE_URL", fake_bridge_url())
            .env("CALLBACKD_STORE_TOKEN", STORE_TOKEN)
            .env("CALLBACKD_TOOL_TOKEN", TOOL_TOKEN)
            .env(
                "CURSOR_SDK_TOOL_CALLBACK_AUTH_TOKEN",
                "stale-token-from-the-shell",
            )
            .env_remove("CALLBACKD_LISTEN")
            .env_remove("CALLBACKD_CONFIG")
            .env_remove("CALLBACKD_DB")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        if opts.broken_stderr {
            drop(stderr);
            drop(tx);
        } else {
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { return };
                    if tx.send(line).is_err() {
                        return;
                    }
                }
            });
        }
        Run {
            child,
            dir,
            lines,
            stderr: Vec::new(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Waits for a stderr line starting with `prefix`; returns the rest.
    fn wait_line(&mut self, prefix: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        if let Some(l) = self.stderr.iter().find(|l| l.starts_with(prefix)) {
            return l[prefix.len()..].to_string();
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.stderr.push(line.clone());
                    if let Some(rest) = line.strip_prefix(prefix) {
                        return rest.to_string();
                    }
                }
                Err(_) => panic!("no line {prefix:?} on stderr:\n{}", self.stderr.join("\n")),
            }
        }
    }

    /// Waits for callbackd to exit; returns its status and all of its stderr.
    fn wait_exit(&mut self, timeout: Duration) -> (ExitStatus, String) {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "callbackd did not exit within {timeout:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        // the reader thread ends at EOF, once every holder of the pipe is gone
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.stderr.push(line);
        }
        (status, self.stderr.join("\n"))
    }

    fn signal(&self, sig: Signal) {
        kill(Pid::from_raw(self.child.id() as i32), sig).unwrap();
    }

    fn pid(&self, name: &str) -> i32 {
        read_pid(&self.path(name)).unwrap_or_else(|| panic!("no pid file {name}"))
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        // A failed test must not leave its processes behind either. (A passing one has
        // checked that they are gone; their pids may since belong to someone else.)
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !std::thread::panicking() {
            return;
        }
        for name in ["node.pid", "wrapper.pid"] {
            if let Some(pid) = read_pid(&self.path(name)) {
                let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
        for name in ["kid.pid", "straggler.pid", "node.pid"] {
            if let Some(pid) = read_pid(&self.path(name)) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}

fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// A live process (zombies, already dead but not reaped by their new parent, do not count).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z"),
        Err(_) => false,
    }
}

fn assert_all_gone(run: &Run, names: &[&str]) {
    wait_gone(run, names, Duration::from_secs(2));
}

/// Pids of running `callbackd watchdog` processes guarding process group `pgid`.
fn watchdogs_of(pgid: i32) -> Vec<i32> {
    let want = ["watchdog", "--pgid", &pgid.to_string()].map(String::from);
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| alive(pid))
        .filter(|pid| {
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                return false;
            };
            let args: Vec<String> = cmdline
                .split(|&b| b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            args.windows(3).any(|w| w == want)
        })
        .collect()
}

/// Waits up to `timeout` for the processes in the pid files `names` to be gone.
fn wait_gone(run: &Run, names: &[&str], timeout: Duration) {
    let deadline = Instant::now() + timeout;
    for name in names {
        let pid = run.pid(name);
        while alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            !alive(pid),
            "{name} ({pid}) still running after {timeout:?}"
        );
    }
}

/// The value after `flag` in the fake bridge's recorded argv.
fn flag_value(argv: &[String], flag: &str) -> String {
    let i = argv
        .iter()
        .position(|a| a == flag)
        .unwrap_or_else(|| panic!("{flag} missing from {argv:?}"));
    argv[i + 1].clone()
}

/// One unauthenticated CallStore request: the status line of the answer.
fn call_store_status(base_url: &str) -> String {
    let addr = base_url.trim_start_matches("http://").trim_end_matches('/');
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "POST /sdk.v1.SdkStoreCallbackService/CallStore HTTP/1.1\r\nHost: {addr}\r\n\
         Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    )
    .unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer.lines().next().unwrap_or_default().to_string()
}

#[test]
fn the_bridge_gets_the_flags_on_argv_and_no_tokens_in_its_environment() {
    let mut run = Run::start(Opts::default());
    run.wait_line("cursor-sdk-bridge ready ");
    let argv: Vec<String> = std::fs::read_to_string(run.path("argv"))
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    // the user's arguments first, then ours
    assert_eq!(&argv[..2], ["--port", "0"]);
    assert_eq!(flag_value(&argv, "--local-store"), r#"{"type":"custom"}"#);
    assert_eq!(
        flag_value(&argv, "--store-callback-auth-token"),
        STORE_TOKEN
    );
    assert_eq!(flag_value(&argv, "--tool-callback-auth-token"), TOOL_TOKEN);
    let url = flag_value(&argv, "--store-callback-url");
    assert_eq!(flag_value(&argv, "--tool-callback-url"), url);
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert!(
        !url.ends_with(":7420/"),
        "run listens on a free port by default: {url}"
    );
    // the daemon serves while the bridge runs, and wants a token
    assert!(call_store_status(&url).contains(" 401 "));

    let env = std::fs::read_to_string(run.path("env")).unwrap();
    assert!(
        !env.contains(STORE_TOKEN) && !env.contains(TOOL_TOKEN),
        "{env}"
    );
    assert!(!env.contains("CALLBACKD_STORE_TOKEN") && !env.contains("CURSOR_SDK_TOOL_CALLBACK"));
    assert!(
        env.contains("FAKE_MODE=serve"),
        "the rest of the environment is kept"
    );

    run.signal(Signal::SIGTERM);
    let (status, _) = run.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(0));
}

#[test]
fn stderr_is_relayed_unchanged_and_the_ready_file_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let mut run = Run::start(Opts::default());
    let ready = run.wait_line("cursor-sdk-bridge ready ");
    // the file is in place by the time the line is relayed
    let file = std::fs::read_to_string(run.path("ready.json")).unwrap();
    assert_eq!(file.trim_end(), ready);
    let json: serde_json::Value = serde_json::from_str(&ready).unwrap();
    assert_eq!(json["pid"], run.pid("node.pid"));
    let mode = std::fs::metadata(run.path("ready.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    run.wait_line("after ready");

    run.signal(Signal::SIGTERM);
    let (status, stderr) = run.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(0), "{stderr}");
    let relayed: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.contains("callbackd") && !l.contains(" INFO ") && !l.contains(" WARN "))
        .collect();
    // (dash may add a "Terminated" notice for the fake's own child afterwards)
    assert_eq!(
        relayed[..3],
        [
            "fake bridge starting",
            &format!("cursor-sdk-bridge ready {ready}"),
            "after ready"
        ]
    );
    // a ready file describes a live bridge; the bridge's token file is dead with it
    assert!(!run.path("ready.json").exists());
    assert!(!run.path("tmp/cursor-sdk-bridge-test").exists());
}

#[test]
fn sigterm_reaches_the_bridge_group_and_callbackd_exits_with_its_status() {
    let mut run = Run::start(Opts::default());
    run.wait_line("cursor-sdk-bridge ready ");
    run.signal(Signal::SIGTERM);
    let (status, stderr) = run.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(run.path("got")).unwrap().trim(),
        "TERM"
    );
    assert!(
        run.path("done").exists(),
        "the bridge could finish its shutdown"
    );
    assert_all_gone(&run, &["node.pid", "kid.pid"]);
    assert!(
        watchdogs_of(run.pid("node.pid")).is_empty(),
        "a clean stop releases the watchdog"
    );
    assert!(!stderr.contains("callbackd watchdog:"), "{stderr}");
}

#[test]
fn a_sigkilled_callbackd_does_not_leave_its_bridge_running() {
    let mut run = Run::start(Opts::default());
    run.wait_line("cursor-sdk-bridge ready ");
    let node = run.pid("node.pid");
    assert_eq!(
        watchdogs_of(node).len(),
        1,
        "one watchdog guards the bridge"
    );
    run.signal(Signal::SIGKILL);
    // The watchdog stops the group the way callbackd would have: SIGTERM, and SIGKILL only
    // after the stop timeout. (Whether the fake bridge's shell gets to run its TERM trap
    // varies: with callbackd gone its stderr is a broken pipe, and dash's "Terminated"
    // notice for its killed child can end it by SIGPIPE first.)
    wait_gone(&run, &["node.pid", "kid.pid"], Duration::from_secs(10));
    let (status, stderr) = run.wait_exit(Duration::from_secs(5));
    assert_eq!(status.signal(), Some(9));
    assert!(
        stderr.contains("callbackd watchdog: callbackd ended without stopping the bridge"),
        "{stderr}"
    );
    assert!(!stderr.contains("sent SIGKILL"), "{stderr}");
    assert!(
        watchdogs_of(node).is_empty(),
        "the watchdog exits when done"
    );
}

#[test]
fn the_watchdog_acts_even_when_nobody_reads_stderr_any_more() {
    // callbackd's stderr is a pipe whose reader is gone (a `| tee` that died with it): the
    // watchdog's message fails with EPIPE, and must not stand between the bridge and its
    // SIGTERM.
    let run = Run::start(Opts {
        broken_stderr: true,
        ..Opts::default()
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while !run.path("ready.json").exists() {
        assert!(Instant::now() < deadline, "the bridge never got ready");
        std::thread::sleep(Duration::from_millis(20));
    }
    run.signal(Signal::SIGKILL);
    wait_gone(&run, &["node.pid", "kid.pid"], Duration::from_secs(10));
}

#[test]
fn after_a_sigkill_a_bridge_that_ignores_sigterm_is_killed_after_the_stop_timeout() {
    let mut run = Run::start(Opts {
        mode: "ignore",
        ..Opts::default()
    });
    run.wait_line("cursor-sdk-bridge ready ");
    let t0 = Instant::now();
    run.signal(Signal::SIGKILL);
    wait_gone(&run, &["node.pid", "kid.pid"], Duration::from_secs(15));
    // --stop-timeout 2
    assert!(t0.elapsed() >= Duration::from_secs(2), "{:?}", t0.elapsed());
    let (_, stderr) = run.wait_exit(Duration::from_secs(5));
    assert!(stderr.contains("sent SIGKILL"), "{stderr}");
}

#[test]
fn behind_an_sh_wrapper_node_is_stopped_too_and_not_cut_short() {
    let mut run = Run::start(Opts {
        wrapper: true,
        ..Opts::default()
    });
    run.wait_line("cursor-sdk-bridge ready ");
    run.signal(Signal::SIGTERM);
    let (status, stderr) = run.wait_exit(Duration::from_secs(20));
    // the wrapper itself dies of the SIGTERM it was forwarded, node shuts down cleanly: a
    // clean stop, 0 (not 128 + 15, which a supervisor would take for a crash)
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("the bridge stopped on the SIGTERM it was sent"),
        "{stderr}"
    );
    assert!(
        run.path("done").exists(),
        "node got the TERM and finished shutting down after the wrapper died: {stderr}"
    );
    assert!(!stderr.contains("did not stop within"), "{stderr}");
    assert_all_gone(&run, &["wrapper.pid", "node.pid", "kid.pid"]);
}

#[test]
fn a_signal_callbackd_did_not_forward_still_reads_as_128_plus_n() {
    let mut run = Run::start(Opts {
        wrapper: true,
        ..Opts::default()
    });
    run.wait_line("cursor-sdk-bridge ready ");
    // someone else kills the wrapper: not a stop callbackd was asked for
    kill(Pid::from_raw(run.pid("wrapper.pid")), Signal::SIGTERM).unwrap();
    let (status, stderr) = run.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(143), "{stderr}");
    assert_all_gone(&run, &["wrapper.pid", "node.pid", "kid.pid"]);
}

#[test]
fn sigint_is_forwarded_as_sigint() {
    let mut run = Run::start(Opts::default());
    run.wait_line("cursor-sdk-bridge ready ");
    run.signal(Signal::SIGINT);
    let (status, stderr) = run.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(run.path("got")).unwrap().trim(),
        "INT"
    );
    assert_all_gone(&run, &["node.pid", "kid.pid"]);
}

#[test]
fn a_bridge_that_ignores_sigterm_is_killed_after_the_stop_timeout() {
    let mut run = Run::start(Opts {
        mode: "ignore",
        ..Opts::default()
    });
    run.wait_line("cursor-sdk-bridge ready ");
    let t0 = Instant::now();
    run.signal(Signal::SIGTERM);
    let (status, stderr) = run.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(128 + 9), "{stderr}");
    assert!(t0.elapsed() >= Duration::from_secs(2), "{:?}", t0.elapsed());
    assert_all_gone(&run, &["node.pid", "kid.pid"]);
}

#[test]
fn processes_the_bridge_leaves_behind_are_stopped() {
    let mut run = Run::start(Opts {
        mode: "straggler",
        ..Opts::default()
    });
    run.wait_line("cursor-sdk-bridge ready ");
    run.signal(Signal::SIGTERM);
    let (status, stderr) = run.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(run.path("straggler.pid").exists());
    assert_all_gone(&run, &["node.pid", "kid.pid", "straggler.pid"]);
}

#[test]
fn when_the_bridge_exits_on_its_own_callbackd_exits_with_its_status() {
    let mut run = Run::start(Opts {
        mode: "exit3",
        ..Opts::default()
    });
    let (status, stderr) = run.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("cursor-sdk-bridge ready "));
    assert!(!run.path("ready.json").exists());
    assert_all_gone(&run, &["node.pid", "kid.pid"]);
}

#[test]
fn a_bridge_killed_by_a_signal_gives_128_plus_the_signal() {
    let mut run = Run::start(Opts {
        mode: "selfkill",
        ..Opts::default()
    });
    let (status, stderr) = run.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(128 + 10), "{stderr}");
    assert!(stderr.contains("SIGUSR1"), "{stderr}");
}

#[test]
fn callback_flags_already_on_the_bridge_command_are_refused() {
    for flag in ["--store-callback-url", "--local-store={}"] {
        let mut run = Run::start(Opts {
            bridge_args: vec![flag, "x"],
            ..Opts::default()
        });
        let (status, stderr) = run.wait_exit(Duration::from_secs(20));
        assert_eq!(status.code(), Some(1), "{stderr}");
        let name = flag.split('=').next().unwrap();
        assert!(stderr.contains(&format!("already has {name}")), "{stderr}");
        assert!(!run.path("node.pid").exists(), "the bridge was started");
        assert!(!run.path("callbackd.db").exists(), "the daemon was started");
    }
}

#[test]
fn when_the_daemon_cannot_start_the_bridge_is_not_spawned() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_dir = dir.path().join("plain-file");
    std::fs::write(&not_a_dir, "").unwrap();
    let db = not_a_dir.join("callbackd.db");
    let mut run = Run::start(Opts {
        db: Some(db),
        ..Opts::default()
    });
    let (status, stderr) = run.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("callbackd: error:"), "{stderr}");
    assert!(
        stderr.contains("plain-file"),
        "the error names the path: {stderr}"
    );
    assert!(!run.path("node.pid").exists(), "the bridge was started");
    assert!(!stderr.contains("cursor-sdk-bridge ready"));
}

#[test]
fn a_missing_bridge_program_is_a_clear_error() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_callbackd"));
    let dir = tempfile::tempdir().unwrap();
    let out = cmd
        .args(["run", "--db"])
        .arg(dir.path().join("x.db"))
        .args(["--", "/nonexistent/cursor-sdk-bridge"])
        .env_remove("CALLBACKD_LISTEN")
        .env_remove("CALLBACKD_CONFIG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot start the bridge \"/nonexistent/cursor-sdk-bridge\""),
        "{stderr}"
    );
}

#[test]
fn a_bridge_that_dies_at_start_fails_run_with_its_last_lines_and_status() {
    let mut run = Run::start(Opts {
        mode: "early",
        ..Opts::default()
    });
    let (status, stderr) = run.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(3), "{stderr}");
    let error = stderr
        .lines()
        .position(|l| l.starts_with("callbackd: error: the bridge did not start"))
        .unwrap_or_else(|| panic!("no start error: {stderr}"));
    let tail: Vec<&str> = stderr.lines().skip(error).collect();
    assert!(tail[0].contains("exited with status 3"), "{stderr}");
    assert!(tail.contains(&"  Error: TMPDIR is not set"), "{stderr}");
    // Never ready: no ready line of callbackd's, no ready file, no runtime file.
    assert!(!stderr.contains("callbackd ready "), "{stderr}");
    assert!(!run.path("ready.json").exists());
    let left: Vec<_> = std::fs::read_dir(run.dir.path())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains("runtime"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// `callbackd ARGS` from `/`, without any `CALLBACKD_*` variable.
fn client_command(args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_callbackd"));
    cmd.args(args).current_dir("/").stdin(Stdio::null());
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("CALLBACKD_") {
            cmd.env_remove(k);
        }
    }
    cmd.output().unwrap()
}

#[test]
fn client_commands_find_a_run_on_a_free_port_through_its_runtime_file() {
    let mut run = Run::start(Opts::default());
    let ready: serde_json::Value =
        serde_json::from_str(&run.wait_line("callbackd ready ")).unwrap();
    let runtime = PathBuf::from(ready["runtime_file"].as_str().unwrap());
    assert_eq!(
        runtime.parent(),
        Some(run.dir.path()),
        "next to the database"
    );
    let mode = std::fs::metadata(&runtime).unwrap().permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&runtime).unwrap()).unwrap();
    assert_eq!(file["url"], ready["url"]);
    assert_eq!(file["namespace"], "default");
    assert_eq!(file["pid"], run.child.id());

    // From another directory, with only the database's place: no --url, no --listen.
    let db = run.path("callbackd.db");
    let db = db.to_str().unwrap();
    let out = client_command(&["sessions", "--db", db]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The daemon answered: no sessions yet, said on stderr, nothing (no empty table) on stdout.
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no sessions yet"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A wrong URL: nothing on stdout, and the error names the URL and the tokens file.
    let out = client_command(&["sessions", "--db", db, "--url", "http://127.0.0.1:1/"]);
    assert!(!out.status.success());
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("http://127.0.0.1:1/"), "{stderr}");
    assert!(
        stderr.contains(&run.path("callbackd.tokens").display().to_string()),
        "{stderr}"
    );

    // A clean stop removes the file; a client then says no daemon left one.
    run.signal(Signal::SIGTERM);
    let (status, stderr) = run.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!runtime.exists());
    let out = client_command(&["sessions", "--db", db]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no running daemon left a runtime file"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A `callbackd serve` (no bridge) on `db` and a free port, ready; killed when dropped.
struct Serve(Child);

impl Serve {
    fn start(db: &str) -> Serve {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_callbackd"));
        cmd.args(["serve", "--db", db, "--listen", "127.0.0.1:0"])
            .env_remove("CALLBACKD_LISTEN")
            .env_remove("CALLBACKD_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let mut serve = Serve(child);
        for line in stderr.lines() {
            if line.unwrap().starts_with("callbackd ready ") {
                return serve;
            }
        }
        let _ = serve.0.wait();
        panic!("the second daemon never became ready");
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn healthcheck_and_bridge_args_find_a_run_on_a_free_port_and_prefer_it_to_a_later_serve() {
    let mut run = Run::start(Opts::default());
    let ready: serde_json::Value =
        serde_json::from_str(&run.wait_line("callbackd ready ")).unwrap();
    let url = ready["url"].as_str().unwrap().to_string();
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let db = run.path("callbackd.db");
    let db = db.to_str().unwrap();

    let out = client_command(&["healthcheck", "--db", db]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("healthy: {addr} answered /healthz\n")
    );

    let out = client_command(&["bridge-args", "--db", db, "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let args: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(args["storeCallbackUrl"], url.as_str());
    assert_eq!(args["toolCallbackUrl"], url.as_str());

    // A daemon without a bridge started later on the same data: the clients stay with the
    // one that can run turns, and say that they chose and which.
    let _serve = Serve::start(db);
    for command in [&["sessions", "--db", db][..], &["healthcheck", "--db", db]] {
        let out = client_command(command);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{command:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "callbackd: 2 daemons run on this data directory; using pid {} at {url} \
                 (bridge of namespace default",
                run.child.id()
            )),
            "{command:?}: {stderr}"
        );
        assert!(stderr.contains("(no bridge"), "{command:?}: {stderr}");
    }
    let out = client_command(&["healthcheck", "--db", db]);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&addr));
}
