//! The daemon's `callbackd ready {json}` line on stderr, and the runtime file written with it.
//!
//! stderr goes to journald, a container's log, a CI log: a secret there is a leak. So the
//! line's `console_url` carries the API token (`#token=`) only when stderr is a terminal (a
//! person is reading it); otherwise it is the bare console URL, and the URL with the token
//! is in the runtime file (mode 0600) the line names as `runtime_file`.

use std::io::IsTerminal;

use serde_json::Value;

use super::runtime_file::{self, RuntimeFile};
use crate::store::Namespace;
use crate::App;

/// Writes the runtime file and prints the ready line; the returned file is removed when
/// dropped (a clean stop). A runtime file that cannot be written is a warning, not a failure:
/// clients can still be given `--url`.
pub fn announce(app: &App, ns: &Namespace) -> Option<RuntimeFile> {
    ReadyLine::of(app, ns, false).announce()
}

/// The ready line of a daemon, taken while the [`App`] is at hand and announced later
/// (`callbackd run` announces once its bridge is ready, when the app is already serving).
#[derive(Debug, Clone)]
pub struct ReadyLine {
    ready: Value,
    url: String,
    ns: Namespace,
    /// `callbackd run`: the daemon drives a bridge (said in the runtime file).
    bridge: bool,
}

impl ReadyLine {
    pub fn of(app: &App, ns: &Namespace, bridge: bool) -> ReadyLine {
        ReadyLine {
            ready: app.ready_json_for(ns),
            url: app.base_url(),
            ns: ns.clone(),
            bridge,
        }
    }

    /// See [`announce`].
    pub fn announce(self) -> Option<RuntimeFile> {
        let mut ready = self.ready;
        let console = ready
            .get("console_url")
            .and_then(Value::as_str)
            .map(str::to_string);
        let db = ready
            .get("db")
            .and_then(Value::as_str)
            .map(std::path::PathBuf::from)
            .unwrap_or_default();
        let dir = runtime_file::dir_of(&db);
        let file = match RuntimeFile::write(&dir, &self.url, &self.ns, console.clone(), self.bridge)
        {
            Ok(f) => Some(f),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e,
                    "cannot write the runtime file: client commands need --url");
                None
            }
        };
        if let Some(f) = &file {
            ready["runtime_file"] = f.path().display().to_string().into();
        }
        if !std::io::stderr().is_terminal() {
            ready["console_url"] = console.map(|c| without_token(&c).to_string()).into();
        }
        crate::telemetry::stderr_line(format_args!("callbackd ready {ready}"));
        file
    }
}

/// A console URL without its `#token=` fragment.
pub fn without_token(url: &str) -> &str {
    url.split_once('#').map_or(url, |(bare, _)| bare)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fragment_goes() {
        assert_eq!(
            without_token("http://127.0.0.1:1/ui/#token=s3cret"),
            "http://127.0.0.1:1/ui/"
        );
        assert_eq!(without_token("http://h/ui/"), "http://h/ui/");
    }
}
