//! Logging: `tracing` to stderr, as text or JSON lines. Per-call lines carry the operation,
//! outcome and latency; payloads and tokens are never logged.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::{LogConfig, LogFormat};

/// Installs the global subscriber. `RUST_LOG`, when set, wins over `log.level`.
pub fn init(config: &LogConfig) {
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|f| EnvFilter::try_new(f).ok())
        .or_else(|| EnvFilter::try_new(&config.level).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        // Otherwise a failed write (stderr a pipe whose reader died: a `| tee` that was
        // killed, a restarted log collector) is reported with `eprintln!`, which panics on
        // the same broken pipe, and the panic's own log line then aborts the daemon.
        .log_internal_errors(false);
    let result = match config.format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    // A second init (tests building several apps) keeps the first subscriber.
    if result.is_ok() {
        log_panics();
    }
}

/// Writes one line to stderr. Unlike `eprintln!`, a stderr nobody reads any more (a pipe
/// whose reader died) is not a panic: the process goes on without that line.
///
/// The line is formatted first and written whole: stderr is unbuffered, so `writeln!` with
/// the arguments made one `write` per formatted piece (about 80 for the `callbackd ready
/// {json}` line), and a supervisor or test reading the output meanwhile saw half a line.
pub fn stderr_line(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let text = format!("{line}\n");
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Routes panic messages through `tracing`, so that with `log.format = "json"` a panicking
/// plugin tool leaves one JSON line (message, location, thread) rather than raw text in the
/// middle of the log. Where no subscriber is listening the previous hook runs as before.
fn log_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let unheard =
            tracing::dispatcher::get_default(|d| d.is::<tracing::subscriber::NoSubscriber>());
        if unheard {
            return previous(info);
        }
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("a non-string panic payload");
        let location = info
            .location()
            .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
            .unwrap_or_default();
        let thread = std::thread::current();
        let thread = thread.name().unwrap_or("unnamed");
        let backtrace = std::backtrace::Backtrace::capture();
        if backtrace.status() == std::backtrace::BacktraceStatus::Captured {
            tracing::error!(
                target: "callbackd::panic", %location, thread, %backtrace, "panic: {message}"
            );
        } else {
            tracing::error!(target: "callbackd::panic", %location, thread, "panic: {message}");
        }
    }));
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_panic_is_one_json_log_line_with_its_location() {
        super::log_panics();
        let out = Captured::default();
        let writer = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let _ = std::panic::catch_unwind(|| panic!("tool blew up: {}", 42));
        });
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{text}");
        let line: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(line["fields"]["message"], "panic: tool blew up: 42");
        assert!(
            line["fields"]["location"]
                .as_str()
                .unwrap()
                .starts_with("src/telemetry/logs.rs:"),
            "{line}"
        );
        assert_eq!(line["target"], "callbackd::panic");
    }
}
