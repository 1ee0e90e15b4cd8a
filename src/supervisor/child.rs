//! A running bridge: the child process, its process group, the stop timeout, and the stderr
//! relay, from spawn to clean-up.

use std::fs::File;
use std::path::PathBuf;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::process::Child;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::group::{group_running, GROUP_POLL};
use super::ready::auth_token_file;
use super::relay::{relay_stderr, Tail};
use super::signals::Signals;

/// How long the stderr relay may take to pass on the last lines once the group is gone.
const RELAY_FLUSH: Duration = Duration::from_secs(1);

/// A running bridge: the child, its process group, and the stderr relay.
pub(super) struct Bridge {
    pub(super) child: Child,
    pub(super) pgid: Pid,
    stop_timeout: Duration,
    /// When the group gets SIGKILL; set by the first stop signal.
    pub(super) kill_at: Option<Instant>,
    sent_term: bool,
    /// Every signal forwarded so far, to tell a requested stop from a crash.
    forwarded: Vec<Signal>,
    killed: bool,
    ready_file: Option<PathBuf>,
    /// The ready JSON, once the relay has seen it.
    pub(super) ready: oneshot::Receiver<String>,
    /// The ready JSON, once taken from `ready`.
    pub(super) ready_json: Option<String>,
    /// Resolves when the relay has passed on the last line.
    relayed: oneshot::Receiver<()>,
    /// Lets the relay pass on the bridge's ready line (held until callbackd is ready too).
    release_ready_line: Option<std::sync::mpsc::Sender<()>>,
    /// The bridge's last stderr lines.
    pub(super) tail: Tail,
}

impl Bridge {
    pub(super) fn start(
        mut child: Child,
        ready_file: Option<PathBuf>,
        stop_timeout: Duration,
    ) -> Self {
        // process_group(0): the group id is the child's pid. A child that is already gone
        // has pid None; its group is then empty and every signal below is a no-op.
        let pid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .unwrap_or(0);
        let (ready_tx, ready) = oneshot::channel();
        let (relayed_tx, relayed) = oneshot::channel();
        let (release_tx, go) = std::sync::mpsc::channel();
        let tail = Tail::default();
        match child.stderr.take().map(|e| e.into_owned_fd()) {
            Some(Ok(fd)) => {
                let tail = tail.clone();
                std::thread::Builder::new()
                    .name("bridge-stderr".into())
                    .spawn(move || {
                        relay_stderr(File::from(fd), ready_tx, &go, &tail);
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
            forwarded: Vec::new(),
            killed: false,
            ready_file,
            ready,
            ready_json: None,
            relayed,
            release_ready_line: Some(release_tx),
            tail,
        }
    }

    /// Lets the relay pass on the bridge's ready line.
    pub(super) fn release_ready_line(&mut self) {
        if let Some(tx) = self.release_ready_line.take() {
            let _ = tx.send(());
        }
    }

    /// The path `--ready-file` asked for.
    pub(super) fn ready_file(&self) -> Option<&std::path::Path> {
        self.ready_file.as_deref()
    }

    /// The bridge's last stderr lines, oldest first.
    pub(super) fn last_lines(&self) -> Vec<String> {
        self.tail
            .lock()
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn signal_group(&self, sig: Signal) -> nix::Result<()> {
        if self.pgid.as_raw() <= 0 {
            return Err(Errno::ESRCH);
        }
        killpg(self.pgid, sig)
    }

    /// Passes a signal on to the bridge's group and starts the stop timeout.
    pub(super) fn forward(&mut self, sig: Signal) {
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
        if !self.forwarded.contains(&sig) {
            self.forwarded.push(sig);
        }
        self.kill_at
            .get_or_insert_with(|| Instant::now() + self.stop_timeout);
    }

    /// Whether signal number `sig` was forwarded to the group so far.
    pub(super) fn was_forwarded(&self, sig: i32) -> bool {
        self.forwarded.iter().any(|s| *s as i32 == sig)
    }

    /// Whether the group needed SIGKILL.
    pub(super) fn was_killed(&self) -> bool {
        self.killed
    }

    pub(super) fn kill(&mut self) {
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
    pub(super) async fn reap_group(&mut self, signals: &mut Signals) {
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
    pub(super) async fn clean_up(&mut self) {
        self.release_ready_line();
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
