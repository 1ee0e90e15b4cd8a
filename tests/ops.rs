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
