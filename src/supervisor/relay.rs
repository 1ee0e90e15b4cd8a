//! The bridge's stderr, relayed to ours line by line and unchanged, watching for its ready line.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;

use tokio::sync::oneshot;

use super::ready::{ready_json, write_ready_file};

/// Copies the bridge's stderr to ours, line by line and unchanged. The first ready line's
/// JSON goes to the ready file *before* the line is passed on, so whoever sees the line
/// finds the file.
pub(super) fn relay_stderr(
    from: File,
    ready_file: Option<&Path>,
    ready_tx: oneshot::Sender<String>,
) {
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
