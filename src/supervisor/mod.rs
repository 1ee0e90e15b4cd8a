//! `callbackd run -- <bridge>`: the daemon with the Cursor SDK bridge as its child process.
//!
//! The daemon comes first: the bridge is spawned only once the listener is bound and the
//! store is open, so a daemon that cannot start never leaves a bridge pointing nowhere.
//! The callback flags go on the bridge's argv ([`BridgeArgs::argv`]), and callbackd's token
//! variables are removed from its environment: the bridge's model-driven shell tools inherit
//! that environment, but not its argv.
//!
//! The bridge runs in its own process group, because `bin/cursor-sdk-bridge` is an `sh`
//! wrapper that runs node as a child: signalling only the wrapper's pid would orphan node.
//! Lifetime, in order:
//! 1. SIGINT, SIGTERM and SIGHUP sent to callbackd are forwarded to the bridge's group; if the
//!    bridge has not exited [`RunOptions::stop_timeout`] after the first one, the group gets
//!    SIGKILL.
//! 2. Once the bridge has exited (after a signal or on its own), what is left of its group gets
//!    SIGTERM (unless it already had one) and SIGKILL when the stop timeout runs out.
//! 3. The daemon stops accepting, drains in-flight callbacks and closes the store.
//! 4. callbackd exits with the bridge's status, 128 + the signal number if a signal ended it.
//!
//! The bridge's stderr is relayed line by line, unchanged (adapters parse its
//! `cursor-sdk-bridge ready {json}` line); its stdout is inherited; its stdin is `/dev/null`
//! (it reads none, and in its own process group a terminal read would stop it).
//!
//! If callbackd itself dies without doing this (SIGKILL, OOM killer, a crash), the
//! [`watchdog`] process it started next to the bridge stops the bridge's group instead.
//!
//! Not covered: descendants that leave the bridge's process group (`setsid`) are out of
//! reach.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use anyhow::Context;
use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::process::Child;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::app::AppBuilder;
use crate::bridge::BridgeArgs;
use crate::config;

pub mod watchdog;

/// The prefix of the bridge's ready line on stderr; the rest of the line is JSON.
pub const READY_PREFIX: &str = "cursor-sdk-bridge ready ";

/// Listen address of `run` when neither `--listen`, `CALLBACKD_LISTEN` nor the config file
/// chose one: any free loopback port, since the bridge learns the URL from its argv.
pub const FREE_PORT_LISTEN: &str = "127.0.0.1:0";

/// How long the bridge gets to exit after the first forwarded signal.
pub const DEFAULT_STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// The bridge flags `run` sets itself; a bridge command that already has one is refused.
pub const OWNED_FLAGS: [&str; 5] = [
    "--local-store",
    "--store-callback-url",
    "--store-callback-auth-token",
    "--tool-callback-url",
    "--tool-callback-auth-token",
];

/// Variables removed from the bridge's environment: callbackd's own tokens, and the bridge's
/// callback settings (the flags override them anyway, and tokens in them would be readable by
/// every command an agent runs).
pub const SCRUBBED_ENV: [&str; 9] = [
    config::env::STORE_TOKEN,
    config::env::TOOL_TOKEN,
    "CURSOR_SDK_LOCAL_STORE",
    "CURSOR_SDK_STORE_CALLBACK_URL",
    "CURSOR_SDK_STORE_CALLBACK_AUTH_TOKEN",
    "CURSOR_SDK_STORE_CALLBACK_TOKEN",
    "CURSOR_SDK_TOOL_CALLBACK_URL",
    "CURSOR_SDK_TOOL_CALLBACK_AUTH_TOKEN",
    "CURSOR_SDK_TOOL_CALLBACK_TOKEN",
];

/// How often the bridge's process group is checked for stragglers after the bridge exited.
const GROUP_POLL: Duration = Duration::from_millis(50);

/// How long the stderr relay may take to pass on the last lines once the group is gone.
const RELAY_FLUSH: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    #[error("no bridge command given: callbackd run [OPTIONS] -- <bridge command> [ARGS...]")]
    NoCommand,
    #[error(
        "the bridge command already has {flag}: `callbackd run` passes the callback flags \
         ({}) itself; remove it, or start the bridge yourself with the flags from \
         `callbackd bridge-args`",
        OWNED_FLAGS.join(", ")
    )]
    FlagConflict { flag: String },
    #[error("--ready-file {}: {reason}", path.display())]
    ReadyFile { path: PathBuf, reason: String },
    #[error("cannot start the bridge {program:?}: {source}")]
    Spawn { program: String, source: io::Error },
}

/// The bridge's command line as the user gave it, checked for flags `run` owns.
#[derive(Debug, Clone)]
pub struct BridgeCommand {
    program: OsString,
    args: Vec<OsString>,
}

impl BridgeCommand {
    /// Checks a command line (program first). `--flag value` and `--flag=value` both count
    /// as the flag being present.
    pub fn new(argv: Vec<OsString>) -> Result<Self, SupervisorError> {
        let mut argv = argv.into_iter();
        let program = argv.next().ok_or(SupervisorError::NoCommand)?;
        let args: Vec<OsString> = argv.collect();
        for arg in &args {
            if let Some(flag) = owned_flag(arg) {
                return Err(SupervisorError::FlagConflict { flag: flag.into() });
            }
        }
        Ok(BridgeCommand { program, args })
    }

    pub fn program(&self) -> &OsStr {
        &self.program
    }
}

fn owned_flag(arg: &OsStr) -> Option<&'static str> {
    let arg = arg.as_encoded_bytes();
    OWNED_FLAGS.into_iter().find(|flag| {
        arg.strip_prefix(flag.as_bytes())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(b"="))
    })
}

/// Options of `callbackd run` besides the daemon's configuration.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Where to write the bridge's ready JSON (mode 0600) once it is ready. Removed at start
    /// (a stale file would point at a dead bridge) and again when the bridge has exited.
    pub ready_file: Option<PathBuf>,
    /// How long the bridge's process group gets between SIGTERM (or the forwarded signal)
    /// and SIGKILL.
    pub stop_timeout: Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            ready_file: None,
            stop_timeout: DEFAULT_STOP_TIMEOUT,
        }
    }
}

/// How the bridge ended; an error when it is not a success, so `main` can exit with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BridgeExit {
    /// It exited with this status.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
}

impl BridgeExit {
    pub fn from_status(status: ExitStatus) -> Self {
        match (status.code(), status.signal()) {
            (Some(code), _) => BridgeExit::Code(code),
            (None, Some(sig)) => BridgeExit::Signal(sig),
            (None, None) => BridgeExit::Code(1),
        }
    }

    pub fn success(self) -> bool {
        self == BridgeExit::Code(0)
    }

    /// callbackd's own exit status: the bridge's, or 128 + the signal number, as shells do.
    pub fn exit_code(self) -> u8 {
        let code = match self {
            BridgeExit::Code(code) => code,
            BridgeExit::Signal(sig) => 128 + sig,
        };
        u8::try_from(code).unwrap_or(u8::MAX)
    }

    /// `Ok` for a success, else this exit as the error.
    pub fn into_result(self) -> Result<(), BridgeExit> {
        if self.success() {
            Ok(())
        } else {
            Err(self)
        }
    }
}

impl fmt::Display for BridgeExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BridgeExit::Code(code) => write!(f, "the bridge exited with status {code}"),
            BridgeExit::Signal(sig) => match Signal::try_from(sig) {
                Ok(s) => write!(f, "the bridge was killed by {}", s.as_str()),
                Err(_) => write!(f, "the bridge was killed by signal {sig}"),
            },
        }
    }
}

impl std::error::Error for BridgeExit {}

/// Whether the user chose the listen address (`--listen`, `CALLBACKD_LISTEN`, or
/// `server.listen` in the config file); if not, `run` listens on [`FREE_PORT_LISTEN`].
pub fn user_chose_listen(config_file: Option<&Path>, cli_listen: Option<&str>) -> bool {
    if cli_listen.is_some() || std::env::var_os(config::env::LISTEN).is_some() {
        return true;
    }
    let Some(path) = config_file else {
        return false;
    };
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| toml::from_str::<toml::Table>(&text).ok())
        .is_some_and(|t| t.get("server").and_then(|s| s.get("listen")).is_some())
}

/// Builds and starts the daemon, then runs the bridge under it until the bridge exits;
/// returns how the bridge ended. An error means the bridge never ran (or the daemon failed
/// under it); nothing started here is left running in either case.
pub async fn run(
    app: AppBuilder,
    bridge: BridgeCommand,
    opts: RunOptions,
) -> anyhow::Result<BridgeExit> {
    // Before anything is spawned: from here on a signal is ours to forward, and a SIGTERM
    // can no longer kill callbackd between the spawn and the wait, orphaning the bridge.
    let mut signals = Signals::install()?;
    if let Some(path) = &opts.ready_file {
        prepare_ready_file(path)?;
    }
    let app = app.build().await?;
    let flags = BridgeArgs::new(&app.base_url(), app.tokens());
    let api = app.api().clone();
    let (bridge_model, bridge_key) = app.bridge_defaults();
    crate::telemetry::stderr_line(format_args!("callbackd ready {}", app.ready_json()));
    tracing::info!(url = %app.base_url(), "callbackd listening; starting the bridge");
    let (stop_server, stopped) = oneshot::channel::<()>();
    let mut server = tokio::spawn(app.run_until(async {
        let _ = stopped.await;
    }));

    if let Some(sig) = signals.pending() {
        let _ = stop_server.send(());
        let _ = server.await;
        anyhow::bail!("{} received before the bridge was started", sig.as_str());
    }
    let child = match spawn(&bridge, &flags) {
        Ok(child) => child,
        Err(e) => {
            let _ = stop_server.send(());
            let _ = server.await;
            return Err(e.into());
        }
    };
    let mut bridge = Bridge::start(child, opts.ready_file.clone(), opts.stop_timeout);
    let watchdog = match watchdog::Watchdog::spawn(bridge.pgid, opts.stop_timeout) {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!(
                error = %e,
                "cannot start the bridge watchdog: if callbackd is killed, the bridge stays"
            );
            None
        }
    };

    // 1. Until the bridge exits: forward signals; the daemon serves meanwhile.
    let mut server_failed = false;
    let status = loop {
        tokio::select! {
            status = bridge.child.wait() => break status,
            ready = &mut bridge.ready, if bridge.ready_json.is_none() => {
                // The run API drives the bridge it supervises.
                let json = ready.unwrap_or_default();
                match serde_json::from_str(&json)
                    .map_err(|e| e.to_string())
                    .and_then(|v| crate::api::bridge::BridgeClient::from_ready(&v, bridge_model.clone(), bridge_key.clone()))
                {
                    Ok(client) => api.bridge().attach(client),
                    Err(e) => tracing::warn!(error = %e, "cannot attach the run API to the bridge"),
                }
                bridge.ready_json = Some(json);
            }
            sig = signals.recv() => bridge.forward(sig),
            () = until(bridge.kill_at) => bridge.kill(),
            res = &mut server, if !server_failed => {
                // run_until only returns once told to: this is a panic or a bug.
                tracing::error!(?res, "the daemon stopped under the bridge; stopping the bridge");
                server_failed = true;
                bridge.forward(Signal::SIGTERM);
            }
        }
    };
    let exit = match status {
        Ok(status) => BridgeExit::from_status(status),
        Err(e) => {
            tracing::error!(error = %e, "cannot wait for the bridge");
            BridgeExit::Code(1)
        }
    };
    tracing::info!(pid = bridge.pgid.as_raw(), "{exit}");

    // 2. Stragglers: whatever is left of the bridge's process group.
    bridge.reap_group(&mut signals).await;
    if let Some(watchdog) = watchdog {
        watchdog.release().await;
    }

    // 3. The daemon: stop accepting, drain in-flight callbacks.
    let _ = stop_server.send(());
    if !server_failed {
        tokio::select! {
            res = &mut server => match res {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::error!(error = %e, "the daemon stopped with an error"),
                Err(e) => tracing::error!(error = %e, "the daemon stopped abnormally"),
            },
            sig = signals.recv() => {
                tracing::warn!("{} received, not waiting for in-flight callbacks", sig.as_str());
            }
        }
    }
    bridge.clean_up().await;
    anyhow::ensure!(!server_failed, "the daemon stopped unexpectedly; {exit}");
    Ok(exit)
}

/// The signals callbackd forwards to the bridge.
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> anyhow::Result<Self> {
        let listen = |kind: SignalKind, name: &str| {
            signal(kind).with_context(|| format!("cannot listen for {name}"))
        };
        Ok(Signals {
            int: listen(SignalKind::interrupt(), "SIGINT")?,
            term: listen(SignalKind::terminate(), "SIGTERM")?,
            hup: listen(SignalKind::hangup(), "SIGHUP")?,
        })
    }

    async fn recv(&mut self) -> Signal {
        tokio::select! {
            _ = self.int.recv() => Signal::SIGINT,
            _ = self.term.recv() => Signal::SIGTERM,
            _ = self.hup.recv() => Signal::SIGHUP,
        }
    }

    /// A signal that has already arrived, if any.
    fn pending(&mut self) -> Option<Signal> {
        use futures_util::FutureExt;
        self.recv().now_or_never()
    }
}

/// Sleeps until `at`, or forever.
async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Removes a stale ready file and checks that the new one can be written where asked.
fn prepare_ready_file(path: &Path) -> Result<(), SupervisorError> {
    let fail = |reason: String| SupervisorError::ReadyFile {
        path: path.to_path_buf(),
        reason,
    };
    let dir = ready_dir(path);
    if !dir.is_dir() {
        return Err(fail(format!("directory {} does not exist", dir.display())));
    }
    if path.is_dir() {
        return Err(fail("is a directory".into()));
    }
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(fail(format!("cannot remove the old file: {e}"))),
    }
}

fn ready_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Writes `json` to `path`, mode 0600, through a temporary file in the same directory and a
/// rename, so a reader never sees a partial file.
pub fn write_ready_file(path: &Path, json: &str) -> io::Result<()> {
    let name = path.file_name().unwrap_or_else(|| OsStr::new("ready"));
    let mut tmp_name = OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = ready_dir(path).join(tmp_name);
    let _ = std::fs::remove_file(&tmp);
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(json.as_bytes())?;
        file.write_all(b"\n")?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn spawn(bridge: &BridgeCommand, flags: &BridgeArgs) -> Result<Child, SupervisorError> {
    let mut cmd = tokio::process::Command::new(&bridge.program);
    cmd.args(&bridge.args)
        .args(flags.argv())
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        // Its own group: a signal for the bridge reaches the sh wrapper and node alike.
        .process_group(0);
    for var in SCRUBBED_ENV {
        cmd.env_remove(var);
    }
    let child = cmd.spawn().map_err(|source| SupervisorError::Spawn {
        program: bridge.program.to_string_lossy().into_owned(),
        source,
    })?;
    tracing::info!(pid = child.id(), "bridge started");
    Ok(child)
}

/// A running bridge: the child, its process group, and the stderr relay.
struct Bridge {
    child: Child,
    pgid: Pid,
    stop_timeout: Duration,
    /// When the group gets SIGKILL; set by the first stop signal.
    kill_at: Option<Instant>,
    sent_term: bool,
    killed: bool,
    ready_file: Option<PathBuf>,
    /// The ready JSON, once the relay has seen it.
    ready: oneshot::Receiver<String>,
    /// The ready JSON, once taken from `ready`.
    ready_json: Option<String>,
    /// Resolves when the relay has passed on the last line.
    relayed: oneshot::Receiver<()>,
}

impl Bridge {
    fn start(mut child: Child, ready_file: Option<PathBuf>, stop_timeout: Duration) -> Self {
        // process_group(0): the group id is the child's pid. A child that is already gone
        // has pid None; its group is then empty and every signal below is a no-op.
        let pid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .unwrap_or(0);
        let (ready_tx, ready) = oneshot::channel();
        let (relayed_tx, relayed) = oneshot::channel();
        match child.stderr.take().map(|e| e.into_owned_fd()) {
            Some(Ok(fd)) => {
                let ready_file = ready_file.clone();
                std::thread::Builder::new()
                    .name("bridge-stderr".into())
                    .spawn(move || {
                        relay_stderr(File::from(fd), ready_file.as_deref(), ready_tx);
                        let _ = relayed_tx.send(());
                    })
                    .map(drop)
                    .unwrap_or_else(|e| tracing::error!(error = %e, "cannot relay bridge stderr"));
            }
            Some(Err(e)) => tracing::error!(error = %e, "cannot relay bridge stderr"),
            None => {}
        }
        Bridge {
            child,
            pgid: Pid::from_raw(pid),
            stop_timeout,
            kill_at: None,
            sent_term: false,
            killed: false,
            ready_file,
            ready,
            ready_json: None,
            relayed,
        }
    }

    fn signal_group(&self, sig: Signal) -> nix::Result<()> {
        if self.pgid.as_raw() <= 0 {
            return Err(Errno::ESRCH);
        }
        killpg(self.pgid, sig)
    }

    /// Passes a signal on to the bridge's group and starts the stop timeout.
    fn forward(&mut self, sig: Signal) {
        tracing::info!(
            pgid = self.pgid.as_raw(),
            "forwarding {} to the bridge",
            sig.as_str()
        );
        match self.signal_group(sig) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => tracing::warn!(error = %e, "cannot signal the bridge"),
        }
        self.sent_term |= sig == Signal::SIGTERM;
        self.kill_at
            .get_or_insert_with(|| Instant::now() + self.stop_timeout);
    }

    fn kill(&mut self) {
        tracing::warn!(
            pgid = self.pgid.as_raw(),
            "the bridge did not stop within {:?}; sending SIGKILL to its process group",
            self.stop_timeout
        );
        let _ = self.signal_group(Signal::SIGKILL);
        self.killed = true;
        self.kill_at = None;
    }

    /// True while some process of the bridge's group is still running. Zombies do not count:
    /// a member whose parent died is reparented to init and stays a zombie until init reaps
    /// it, which takes seconds on some machines. Without `/proc` they do count, so at worst
    /// this waits out the stop timeout.
    fn group_alive(&self) -> bool {
        group_running(self.pgid)
    }

    /// After the bridge exited: asks what is left of its group to stop, and kills it when
    /// the stop timeout runs out. Returns once the group is empty or killed.
    async fn reap_group(&mut self, signals: &mut Signals) {
        if self.killed || !self.group_alive() {
            return;
        }
        tracing::info!(
            pgid = self.pgid.as_raw(),
            "the bridge exited but left processes in its group; stopping them"
        );
        if !self.sent_term {
            self.forward(Signal::SIGTERM);
        }
        let kill_at = *self
            .kill_at
            .get_or_insert_with(|| Instant::now() + self.stop_timeout);
        loop {
            tokio::select! {
                () = tokio::time::sleep(GROUP_POLL) => {
                    if !self.group_alive() {
                        return;
                    }
                }
                () = tokio::time::sleep_until(kill_at) => {
                    self.kill();
                    return;
                }
                sig = signals.recv() => self.forward(sig),
            }
        }
    }

    /// Once the bridge is gone: lets the relay finish, removes the ready file and the auth
    /// token file the bridge leaves in its temp directory.
    async fn clean_up(&mut self) {
        let _ = tokio::time::timeout(RELAY_FLUSH, &mut self.relayed).await;
        let ready = self
            .ready_json
            .take()
            .or_else(|| self.ready.try_recv().ok());
        if let (Some(path), Some(_)) = (&self.ready_file, &ready) {
            if let Err(e) = std::fs::remove_file(path) {
                tracing::debug!(error = %e, "cannot remove the ready file");
            }
        }
        if let Some(token_file) = ready.as_deref().and_then(auth_token_file) {
            let _ = std::fs::remove_file(&token_file);
            if let Some(dir) = token_file.parent() {
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
}

/// True while some process of group `pgid` is running (zombies do not count, see
/// [`Bridge::group_alive`]).
fn group_running(pgid: Pid) -> bool {
    if matches!(killpg_probe(pgid), Err(Errno::ESRCH)) {
        return false;
    }
    running_member(pgid).unwrap_or(true)
}

/// Signal 0 to a process group: only checks that it exists.
fn killpg_probe(pgid: Pid) -> nix::Result<()> {
    if pgid.as_raw() <= 0 {
        return Err(Errno::ESRCH);
    }
    killpg(pgid, None)
}

/// Whether a process of group `pgid` is running (not a zombie), from `/proc/<pid>/stat`;
/// `None` where there is no `/proc` to ask.
fn running_member(pgid: Pid) -> Option<bool> {
    let entries = std::fs::read_dir("/proc").ok()?;
    let pgid = pgid.as_raw().to_string();
    let running = entries.flatten().any(|entry| {
        let is_pid = entry
            .file_name()
            .as_encoded_bytes()
            .iter()
            .all(u8::is_ascii_digit);
        let Some(stat) = is_pid
            .then(|| std::fs::read_to_string(entry.path().join("stat")).ok())
            .flatten()
        else {
            return false;
        };
        // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        let Some((_, fields)) = stat.rsplit_once(')') else {
            return false;
        };
        let mut fields = fields.split_whitespace();
        let (state, pgrp) = (fields.next(), fields.nth(1));
        pgrp == Some(pgid.as_str()) && state != Some("Z")
    });
    Some(running)
}

/// The bridge's `authTokenFile` from its ready JSON, if it has the shape the bridge makes
/// (`<tmp>/cursor-sdk-bridge-XXXXXX/auth-token`); nothing else is ever removed.
fn auth_token_file(ready_json: &str) -> Option<PathBuf> {
    let ready: serde_json::Value = serde_json::from_str(ready_json).ok()?;
    let path = PathBuf::from(ready.get("authTokenFile")?.as_str()?);
    let dir_name = path.parent()?.file_name()?.to_str()?;
    (path.is_absolute()
        && path.file_name()? == "auth-token"
        && dir_name.starts_with("cursor-sdk-bridge-"))
    .then_some(path)
}

/// Copies the bridge's stderr to ours, line by line and unchanged. The first ready line's
/// JSON goes to the ready file *before* the line is passed on, so whoever sees the line
/// finds the file.
fn relay_stderr(from: File, ready_file: Option<&Path>, ready_tx: oneshot::Sender<String>) {
    let mut reader = BufReader::new(from);
    let mut ready_tx = Some(ready_tx);
    let mut line = Vec::with_capacity(1024);
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the bridge's stderr");
                return;
            }
        }
        if ready_tx.is_some() {
            if let Some(json) = ready_json(&line) {
                if let Some(path) = ready_file {
                    match write_ready_file(path, json) {
                        Ok(()) => tracing::debug!(path = %path.display(), "ready file written"),
                        Err(e) => tracing::error!(
                            path = %path.display(), error = %e, "cannot write the ready file"
                        ),
                    }
                }
                if let Some(tx) = ready_tx.take() {
                    let _ = tx.send(json.to_string());
                }
            }
        }
        // Errors (our stderr closed) are ignored: we keep reading so the bridge never
        // blocks or gets EPIPE on its stderr.
        let _ = io::stderr().lock().write_all(&line);
    }
}

/// The JSON of a ready line, if `line` is one and its JSON parses.
fn ready_json(line: &[u8]) -> Option<&str> {
    let rest = line.strip_prefix(READY_PREFIX.as_bytes())?;
    let json = std::str::from_utf8(rest)
        .ok()?
        .trim_end_matches(['\r', '\n']);
    match serde_json::from_str::<serde_json::Value>(json) {
        Ok(v) if v.is_object() => Some(json),
        _ => {
            tracing::warn!("the bridge's ready line does not carry a JSON object");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(args: &[&str]) -> Result<BridgeCommand, SupervisorError> {
        BridgeCommand::new(args.iter().map(OsString::from).collect())
    }

    #[test]
    fn owned_flags_are_refused_in_both_forms() {
        for flag in OWNED_FLAGS {
            let err = cmd(&["node", "bridge.js", flag, "x"]).unwrap_err();
            assert!(err.to_string().contains(flag), "{err}");
            let eq = format!("{flag}=x");
            assert!(cmd(&["node", &eq]).is_err());
        }
        let ok = cmd(&["node", "bridge.js", "--local-stores", "--port", "0"]).unwrap();
        assert_eq!(ok.program(), "node");
        assert!(matches!(cmd(&[]), Err(SupervisorError::NoCommand)));
    }

    #[test]
    fn the_program_itself_is_not_checked() {
        assert!(cmd(&["--local-store"]).is_ok());
    }

    #[test]
    fn exit_codes_follow_the_shell_convention() {
        assert_eq!(BridgeExit::Code(0).exit_code(), 0);
        assert!(BridgeExit::Code(0).into_result().is_ok());
        assert_eq!(BridgeExit::Code(3).exit_code(), 3);
        assert_eq!(BridgeExit::Signal(15).exit_code(), 143);
        assert_eq!(
            BridgeExit::Signal(15).to_string(),
            "the bridge was killed by SIGTERM"
        );
        assert_eq!(
            BridgeExit::from_status(ExitStatus::from_raw(9)),
            BridgeExit::Signal(9)
        );
        assert_eq!(
            BridgeExit::from_status(ExitStatus::from_raw(2 << 8)),
            BridgeExit::Code(2)
        );
    }

    #[test]
    fn ready_lines_are_recognised_only_with_a_json_object() {
        assert_eq!(
            ready_json(b"cursor-sdk-bridge ready {\"url\":\"u\"}\n"),
            Some("{\"url\":\"u\"}")
        );
        assert_eq!(ready_json(b"cursor-sdk-bridge ready nope\n"), None);
        assert_eq!(ready_json(b"cursor-sdk-bridge SIGTERM received\n"), None);
    }

    #[test]
    fn only_the_bridges_own_token_file_is_cleaned_up() {
        let ok = r#"{"authTokenFile":"/tmp/cursor-sdk-bridge-Ab12/auth-token"}"#;
        assert_eq!(
            auth_token_file(ok),
            Some(PathBuf::from("/tmp/cursor-sdk-bridge-Ab12/auth-token"))
        );
        for bad in [
            r#"{"authTokenFile":"/home/me/.ssh/id_ed25519"}"#,
            r#"{"authTokenFile":"/tmp/cursor-sdk-bridge-x/other"}"#,
            r#"{"authTokenFile":"cursor-sdk-bridge-x/auth-token"}"#,
            r#"{}"#,
        ] {
            assert_eq!(auth_token_file(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_ready_file_is_private_and_replaced_whole() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ready.json");
        std::fs::write(&path, "old").unwrap();
        write_ready_file(&path, "{\"a\":1}").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn listen_counts_as_chosen_when_the_file_sets_it() {
        let dir = tempfile::tempdir().unwrap();
        let with = dir.path().join("with.toml");
        std::fs::write(&with, "[server]\nlisten = \"127.0.0.1:7420\"\n").unwrap();
        let without = dir.path().join("without.toml");
        std::fs::write(&without, "[store]\npath = \"x.db\"\n").unwrap();
        // CALLBACKD_LISTEN would make every case true; the test environment does not set it.
        if std::env::var_os(config::env::LISTEN).is_none() {
            assert!(user_chose_listen(Some(&with), None));
            assert!(!user_chose_listen(Some(&without), None));
            assert!(!user_chose_listen(None, None));
        }
        assert!(user_chose_listen(None, Some("127.0.0.1:1")));
    }
}
