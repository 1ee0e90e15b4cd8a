//! The `callbackd` binary as a new user meets it: where it keeps its data with no config, how
//! `bridge-args` finds the daemon's tokens, and what its messages say.
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
