//! The servers under test: a spawned `callbackd`, the null server (this binary in its
//! `null-server` mode, a separate process so it does not share the load generator's CPU), or
//! any server given by URL; and what `/proc` tells about them.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};

use crate::client::Endpoint;

/// A server the workloads run against.
pub struct Target {
    pub ep: Arc<Endpoint>,
    /// For CPU and memory figures, when known.
    pub pid: Option<u32>,
    child: Option<Child>,
    /// More daemons on the same store (`--daemons`): client `i` talks to daemon
    /// `i % (1 + peers.len())`, and CPU figures add theirs up.
    pub peers: Vec<Target>,
}

impl Target {
    pub fn external(url: &str, token: &str, pid: Option<u32>) -> anyhow::Result<Target> {
        Ok(Target {
            ep: Arc::new(Endpoint::new(url, token)?),
            pid,
            child: None,
            peers: Vec::new(),
        })
    }

    /// The endpoint client `i` uses.
    pub fn endpoint(&self, i: usize) -> Arc<Endpoint> {
        match i % (1 + self.peers.len()) {
            0 => self.ep.clone(),
            k => self.peers[k - 1].ep.clone(),
        }
    }

    /// The CPU time of every daemon of this target.
    pub fn cpu(&self) -> Option<Duration> {
        let mut total = cpu_time(self.pid?)?;
        for peer in &self.peers {
            total += cpu_time(peer.pid?)?;
        }
        Some(total)
    }
}

impl Drop for Target {
    /// SIGTERM first, as a service manager stops a daemon (callbackd then checkpoints and
    /// removes its WAL), SIGKILL after 5 s.
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .status();
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The run API token of a started daemon whose store token is `token`.
pub fn api_token(token: &str) -> String {
    format!("{token}-api")
}

/// How to start callbackd.
pub struct Spawn<'a> {
    pub bin: &'a Path,
    pub db: &'a Path,
    pub config: Option<&'a Path>,
    pub token: &'a str,
}

/// Starts `callbackd serve` on a free loopback port and waits for its `callbackd ready {json}`
/// line; returns the target and the time from spawn to that line.
pub fn spawn_callbackd(s: &Spawn<'_>) -> anyhow::Result<(Target, Duration)> {
    let mut cmd = Command::new(s.bin);
    cmd.arg("serve")
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--db")
        .arg(s.db);
    if let Some(config) = s.config {
        cmd.arg("--config").arg(config);
    }
    cmd.env("CALLBACKD_STORE_TOKEN", s.token)
        .env("CALLBACKD_TOOL_TOKEN", format!("{}-tools", s.token))
        .env("CALLBACKD_API_TOKEN", api_token(s.token))
        .env_remove("CALLBACKD_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().with_context(|| {
        format!(
            "starting {} (build it with cargo build --release)",
            s.bin.display()
        )
    })?;
    let stderr = child.stderr.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    // Reads the ready line, then keeps draining the per-call log so the daemon never blocks
    // on a full pipe (as it would not under journald or a terminal).
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stderr).lines();
        let mut tx = Some(tx);
        let mut early = Vec::new();
        while let Some(Ok(line)) = lines.next() {
            let Some(ready) = &tx else { continue };
            if let Some(json) = line.strip_prefix("callbackd ready ") {
                let _ = ready.send(Ok(json.to_string()));
                tx = None;
            } else {
                early.push(line);
                if early.len() > 20 {
                    early.remove(0);
                }
            }
        }
        if let Some(tx) = tx {
            let _ = tx.send(Err(early.join("\n")));
        }
    });
    let ready = rx.recv_timeout(Duration::from_secs(20));
    let elapsed = started.elapsed();
    let json = match ready {
        Ok(Ok(json)) => json,
        Ok(Err(log)) => {
            let _ = child.kill();
            let _ = child.wait();
            bail!("callbackd exited before it was ready:\n{log}");
        }
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            bail!("callbackd was not ready within 20 s");
        }
    };
    let ready: serde_json::Value = serde_json::from_str(&json)?;
    let url = ready["url"]
        .as_str()
        .ok_or_else(|| anyhow!("no url in the ready line {json}"))?;
    let pid = child.id();
    Ok((
        Target {
            ep: Arc::new(Endpoint::new(url, s.token)?),
            pid: Some(pid),
            child: Some(child),
            peers: Vec::new(),
        },
        elapsed,
    ))
}

/// Starts this binary as `null-server` and waits for its address.
pub fn spawn_null() -> anyhow::Result<Target> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .arg("null-server")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting the null server")?;
    let stdout = child.stdout.take().expect("piped");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let url = line
        .trim()
        .strip_prefix("null-server ready ")
        .ok_or_else(|| anyhow!("unexpected null server output {line:?}"))?
        .to_string();
    let pid = child.id();
    Ok(Target {
        ep: Arc::new(Endpoint::new(&url, "null")?),
        pid: Some(pid),
        child: Some(child),
        peers: Vec::new(),
    })
}

/// User + system CPU time of a process so far (`/proc/PID/stat`, in USER_HZ = 100 ticks/s).
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may contain spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}

/// `(VmRSS, VmHWM)` in KiB.
pub fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        status
            .lines()
            .find(|l| l.starts_with(name))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Resets the peak RSS (VmHWM) to the current RSS, so each phase reports its own peak.
pub fn reset_peak(pid: u32) -> bool {
    std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/{pid}/clear_refs"))
        .and_then(|mut f| f.write_all(b"5"))
        .is_ok()
}

/// A scratch directory for the spawned daemon's database, removed on drop.
pub struct ScratchDir(pub PathBuf);

impl ScratchDir {
    pub fn new(parent: Option<&Path>) -> anyhow::Result<ScratchDir> {
        let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .subsec_nanos();
        let dir = parent.join(format!("callbackd-bench-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(ScratchDir(dir))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
