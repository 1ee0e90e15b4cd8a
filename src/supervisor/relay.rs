//! The bridge's stderr, relayed to ours line by line and unchanged, watching for its ready line.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

use super::ready::ready_json;

/// How many of the bridge's last stderr lines are kept, to quote when it dies at start.
pub(super) const TAIL_LINES: usize = 20;

/// How long the bridge's ready line is held back at most while callbackd checks the bridge
/// (Ping, attach); past that it is passed on anyway, so the relay never stalls for good.
const HOLD_READY_LINE: Duration = Duration::from_secs(30);

/// The bridge's last stderr lines.
pub(super) type Tail = Arc<Mutex<VecDeque<String>>>;

/// Copies the bridge's stderr to ours, line by line and unchanged. The first ready line's
/// JSON is sent on `ready_tx`, and the line itself is held back until `go` says callbackd
/// is ready too (Ping answered, run API attached, ready file written), so whoever sees the
/// line finds the file and a working run API.
pub(super) fn relay_stderr(
    from: File,
    ready_tx: oneshot::Sender<String>,
    go: &mpsc::Receiver<()>,
    tail: &Tail,
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
                if let Some(tx) = ready_tx.take() {
                    if tx.send(json.to_string()).is_ok() {
                        let _ = go.recv_timeout(HOLD_READY_LINE);
                    }
                }
            }
        }
        if let Ok(mut tail) = tail.lock() {
            if tail.len() == TAIL_LINES {
                tail.pop_front();
            }
            tail.push_back(String::from_utf8_lossy(&line).trim_end().to_string());
        }
        // Errors (our stderr closed) are ignored: we keep reading so the bridge never
        // blocks or gets EPIPE on its stderr.
        let _ = io::stderr().lock().write_all(&line);
    }
}
