//! The fake bridge's Ping, shared by the tests that run `callbackd run` with a fake bridge
//! (`tests/supervisor.rs`, `tests/api/approvals_bound.rs`), included with `#[path]`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

/// The fake bridge's RPC endpoint: `callbackd run` waits for the bridge's `Ping` before it
/// is ready. A thread of the test process answers every request with `200 {}`, as the real
/// bridge answers Ping (a shell script cannot listen).
pub fn fake_bridge_url() -> &'static str {
    static URL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    URL.get_or_init(|| {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                std::thread::spawn(move || answer_ping(conn));
            }
        });
        url
    })
}

fn answer_ping(conn: TcpStream) {
    let mut reader = BufReader::new(conn);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let _ = reader.get_mut().write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\
          Connection: close\r\n\r\n{}",
    );
}
