//! `callbackd run -- <bridge>`: the daemon with the Cursor SDK bridge as its child process.
//!
//! The daemon comes first: the bridge is spawned only once the listener is bound and the
//! store is open, so a daemon that cannot start never leaves a bridge pointing nowhere.
//! The callback flags go on the bridge's argv ([`crate::bridge::BridgeArgs::argv`]), and callbackd's token
//! variables are removed from its environment: the bridge's model-driven shell tools inherit
//! that environment, but not its argv.
//!
//! The bridge runs in its own process group, because `bin/cursor-sdk-bridge` is an `sh`
//! wrapper that runs node as a child: signalling only the wrapper's pid would orphan node.
//! Lifetime, in order:
//! 1. SIGINT and SIGTERM sent to callbackd first begin the stop (no new turn; every held call
//!    cancelled, "callbackd is stopping", so the bridge's tool calls return and it can stop by
//!    itself), then are forwarded to the bridge's group (SIGHUP reloads
//!    callbackd's namespaces and tokens instead, docs/namespaces.md); if the
//!    bridge has not exited [`RunOptions::stop_timeout`] after the first one, the group gets
//!    SIGKILL.
//! 2. Once the bridge has exited (after a signal or on its own), what is left of its group gets
//!    SIGTERM (unless it already had one) and SIGKILL when the stop timeout runs out.
//!    The runs the bridge left unfinished are then ended by callbackd (`error`, "the bridge
//!    that ran it stopped", see `bridge::runs_file`).
//! 3. The daemon stops accepting, drains in-flight callbacks and closes the store.
//! 4. callbackd exits with the bridge's status, 128 + the signal number if a signal ended it;
//!    0 if what ended it was a stop signal callbackd forwarded and its group was gone without
//!    SIGKILL (the `sh` wrapper's clean stop, see [`BridgeExit::Stopped`]).
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
//!
//! Files: this one runs the steps above; `command` (the checked command line and the
//! spawn), `child` (a running bridge: forward, kill, reap, clean up), `group` (is its process
//! group still running), `signals`, `relay` (stderr), `ready` (the ready line and file),
//! `exit` (the status passed on), `start` (the bridge is ready only once it answers a Ping
//! and the run API is attached), [`watchdog`].

mod child;
mod command;
mod exit;
mod group;
mod ready;
pub mod ready_line;
mod relay;
pub mod runtime_file;
mod signals;
mod start;
pub mod watchdog;

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::sync::oneshot;

use crate::app::AppBuilder;
use crate::config;

use child::Bridge;
use command::spawn;
pub use command::{BridgeCommand, OWNED_FLAGS, SCRUBBED_ENV};
pub use exit::BridgeExit;
use ready::prepare_ready_file;
pub use ready::{write_ready_file, READY_PREFIX};
use signals::{until, Signals};
pub use start::NotReady;

/// Listen address of `run` when neither `--listen`, `CALLBACKD_LISTEN` nor the config file
/// chose one: any free loopback port, since the bridge learns the URL from its argv.
pub const FREE_PORT_LISTEN: &str = "127.0.0.1:0";

/// How long the bridge gets to exit after the first forwarded signal.
pub const DEFAULT_STOP_TIMEOUT: Duration = Duration::from_secs(10);

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

/// Options of `callbackd run` besides the daemon's configuration.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Where to write the bridge's ready JSON (mode 0600) once it is ready. Removed at start
    /// (a stale file would point at a dead bridge) and again when the bridge has exited.
    pub ready_file: Option<PathBuf>,
    /// How long the bridge's process group gets between SIGTERM (or the forwarded signal)
    /// and SIGKILL.
    pub stop_timeout: Duration,
    /// The namespace whose tokens the bridge gets, and whose run API drives it.
    pub namespace: crate::store::Namespace,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            namespace: Default::default(),
            ready_file: None,
            stop_timeout: DEFAULT_STOP_TIMEOUT,
        }
    }
}

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
    let flags = app.bridge_args(&opts.namespace)?;
    let api = app.api().clone();
    // Its runs are ours to end once it is gone (and a restart's, if we die first).
    let bridge_runs = app.claim_bridge_runs(&opts.namespace);
    let (bridge_model, bridge_key) = app.bridge_defaults();
    // Announced once the bridge answers and the run API drives it (`start`), not before.
    let mut ready_line = Some(ready_line::ReadyLine::of(&app, &opts.namespace, true));
    let mut runtime_file = None;
    let mut not_ready: Option<String> = None;
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
    let mut relay_ended = false;
    let mut stop_begun = false;
    let status = loop {
        tokio::select! {
            status = bridge.child.wait() => break status,
            ready = &mut bridge.ready, if bridge.ready_json.is_none() && !relay_ended => {
                // The run API drives the bridge it supervises, once it answers a Ping.
                let Ok(json) = ready else {
                    // Its stderr closed without a ready line: its exit is next.
                    relay_ended = true;
                    continue;
                };
                match start::attach(&json, &api.bridge(&opts.namespace), bridge_model.clone(), bridge_key.clone(), &mut bridge).await {
                    Ok(()) => {
                        if let Some(path) = bridge.ready_file() {
                            if let Err(e) = write_ready_file(path, &json) {
                                tracing::error!(path = %path.display(), error = %e, "cannot write the ready file");
                            }
                        }
                        runtime_file = ready_line.take().and_then(ready_line::ReadyLine::announce);
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "the bridge is not usable; stopping it");
                        not_ready = Some(e);
                        bridge.forward(Signal::SIGTERM);
                    }
                }
                bridge.release_ready_line();
                bridge.ready_json = Some(json);
            }
            sig = signals.recv() => {
                // Held calls first (and no new turn): the bridge's tool calls return, so it
                // can stop by itself within the stop timeout. Only then is it told to stop.
                if !stop_begun {
                    stop_begun = true;
                    api.begin_stop(crate::app::STOPPING).await;
                }
                bridge.forward(sig);
            }
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
    // Decided now: reaping the group below may forward a SIGTERM of its own.
    let on_request = matches!(exit, BridgeExit::Signal(sig) if bridge.was_forwarded(sig));

    // 2. Stragglers: whatever is left of the bridge's process group.
    bridge.reap_group(&mut signals).await;
    let exit = match exit {
        BridgeExit::Signal(sig) if on_request && !bridge.was_killed() => BridgeExit::Stopped(sig),
        exit => exit,
    };
    tracing::info!(pid = bridge.pgid.as_raw(), "{exit}");
    // Runs it left unfinished: no bridge will finish them (their streams end now).
    crate::app::end_bridge_runs(
        &api,
        &bridge_runs,
        &format!("the bridge that ran it stopped ({exit})"),
    )
    .await;
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
    drop(runtime_file);
    anyhow::ensure!(!server_failed, "the daemon stopped unexpectedly; {exit}");
    if let Some(why) = not_ready {
        return Err(
            start::NotReady::new(format!("{why}; {exit}"), exit, bridge.last_lines()).into(),
        );
    }
    if ready_line.is_some() && !on_request {
        // It exited on its own before it was ever ready: a start failure, not a run.
        return Err(start::NotReady::new(
            format!("{exit} before it was ready"),
            exit,
            bridge.last_lines(),
        )
        .into());
    }
    Ok(exit)
}

#[cfg(test)]
mod tests {
    use super::*;

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
