//! The real `callbackd` binary as a child process with a generated config file, its
//! `/proc` figures (RSS, open fds), a raw HTTP/1.1 client that sends exact bytes, and a
//! snapshot of everything stored.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader as AsyncBufReader};
use tokio::net::TcpStream;

pub const STORE_PATH: &str = "/sdk.v1.SdkStoreCallbackService/CallStore";
pub const TOOL_PATH: &str = "/sdk.v1.SdkCustomToolCallbackService/CallCustomTool";
pub const STORE_TOKEN: &str = "hardening-store-token";
pub const TOOL_TOKEN: &str = "hardening-tool-token";

/// `[section] key = value` lines for the generated config file.
pub type Settings<'a> = &'a [(&'a str, &'a str)];

/// A running daemon. Dropping it kills the process (SIGKILL) and waits for it.
pub struct Daemon {
    child: Child,
    pub addr: SocketAddr,
    pub pid: u32,
    pub db: PathBuf,
    stderr: Arc<Mutex<Vec<String>>>,
}

/// A daemon that exited instead of becoming ready.
#[derive(Debug)]
pub struct StartFailure {
    pub status: ExitStatus,
    pub stderr: String,
}

/// Writes `dir/callbackd.toml` (database `db`, loopback, port 0, the settings) and starts
/// `callbackd serve` on it; waits for its ready line.
pub fn start(dir: &Path, db: &Path, settings: Settings<'_>) -> Daemon {
    try_start(dir, db, settings).unwrap_or_else(|f| panic!("callbackd did not start: {f:?}"))
}

pub fn try_start(dir: &Path, db: &Path, settings: Settings<'_>) -> Result<Daemon, StartFailure> {
    try_start_with(dir, db, settings, "")
}

/// [`start`] with `extra` appended to the config file as is (arrays of tables such as
/// `[[namespaces]]`, which `settings` cannot express).
pub fn start_with(dir: &Path, db: &Path, settings: Settings<'_>, extra: &str) -> Daemon {
    try_start_with(dir, db, settings, extra)
        .unwrap_or_else(|f| panic!("callbackd did not start: {f:?}"))
}

pub fn try_start_with(
    dir: &Path,
    db: &Path,
    settings: Settings<'_>,
    extra: &str,
) -> Result<Daemon, StartFailure> {
    try_start_as(dir, db, settings, extra, None)
}

/// [`try_start_with`] as user and group `user` (a root test's way to see what a daemon
/// without root's privileges meets: file modes apply to it).
pub fn try_start_as(
    dir: &Path,
    db: &Path,
    settings: Settings<'_>,
    extra: &str,
    user: Option<u32>,
) -> Result<Daemon, StartFailure> {
    let config = dir.join("callbackd.toml");
    let text = format!("{}{extra}", config_text(db, settings));
    std::fs::write(&config, text).expect("write config");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_callbackd"));
    if let Some(id) = user {
        use std::os::unix::process::CommandExt;
        cmd.uid(id).gid(id);
    }
    cmd.arg("serve").arg("--config").arg(&config);
    // Only our settings: no CALLBACKD_* from the environment running the tests.
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("CALLBACKD_") {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd
        .env("CALLBACKD_STORE_TOKEN", STORE_TOKEN)
        .env("CALLBACKD_TOOL_TOKEN", TOOL_TOKEN)
        .env("CALLBACKD_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn callbackd");
    let pid = child.id();
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let (ready_tx, ready_rx) = mpsc::channel();
    {
        // Drain stderr for the daemon's whole life, so it never blocks on a full pipe.
        let lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let stderr = stderr.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Some(json) = line.strip_prefix("callbackd ready ") {
                    let _ = ready_tx.send(json.to_string());
                }
                stderr.lock().unwrap().push(line);
            }
        });
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(ready) = ready_rx.recv_timeout(Duration::from_millis(20)) {
            let v: Value = serde_json::from_str(&ready).expect("ready line is JSON");
            let url = v["url"].as_str().expect("url");
            let addr = url
                .trim_start_matches("http://")
                .trim_end_matches('/')
                .parse()
                .expect("url is host:port");
            return Ok(Daemon {
                child,
                addr,
                pid,
                db: db.to_path_buf(),
                stderr,
            });
        }
        if let Some(status) = child.try_wait().expect("try_wait") {
            // Let the reader thread collect the last lines.
            std::thread::sleep(Duration::from_millis(50));
            let stderr = stderr.lock().unwrap().join("\n");
            return Err(StartFailure { status, stderr });
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("callbackd neither became ready nor exited within 20 s");
        }
    }
}

fn config_text(db: &Path, settings: Settings<'_>) -> String {
    let mut sections: Vec<(&str, Vec<String>)> = vec![
        ("server", vec![r#"listen = "127.0.0.1:0""#.to_string()]),
        (
            "store",
            vec![format!(
                "path = {}",
                toml_string(db.to_str().expect("utf-8 path"))
            )],
        ),
    ];
    for (section, line) in settings {
        match sections.iter_mut().find(|(s, _)| s == section) {
            Some((_, lines)) => lines.push((*line).to_string()),
            None => sections.push((section, vec![(*line).to_string()])),
        }
    }
    sections
        .iter()
        .map(|(s, lines)| format!("[{s}]\n{}\n", lines.join("\n")))
        .collect()
}

fn toml_string(s: &str) -> String {
    serde_json::to_string(s).expect("string")
}

impl Daemon {
    /// SIGTERM and wait (graceful), returning the exit status.
    pub fn stop(mut self) -> ExitStatus {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                return self.child.wait().expect("wait");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGKILL and wait.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    /// Resident memory, from `/proc/<pid>/status`.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .expect("read /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }

    /// Open file descriptors (sockets included), from `/proc/<pid>/fd`.
    pub fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid))
            .expect("read /proc fd")
            .count()
    }

    /// A keep-alive connection to the daemon.
    pub async fn connect(&self) -> Conn {
        Conn::open(self.addr).await.expect("connect")
    }

    /// One CallStore with the JSON codec and the store token, on a fresh connection.
    pub async fn call(&self, substore: &str, method: &str, input: Value) -> Reply {
        let body = json!({"substore": substore, "method": method, "input": input}).to_string();
        let req = Req::store(body.as_bytes()).build();
        let mut conn = self.connect().await;
        conn.send(&req)
            .await
            .expect("send")
            .expect("the daemon answered")
    }

    /// A CallStore that must succeed; returns its `output`.
    pub async fn ok(&self, substore: &str, method: &str, input: Value) -> Value {
        let reply = self.call(substore, method, input).await;
        assert_eq!(reply.status, 200, "{substore}.{method}: {}", reply.text());
        reply.json()["output"].clone()
    }

    /// Sends one request (exact bytes) on a fresh connection; the daemon must answer.
    pub async fn send(&self, bytes: &[u8]) -> Reply {
        let mut conn = self.connect().await;
        conn.send(bytes)
            .await
            .expect("send")
            .expect("the daemon answered")
    }

    /// [`Daemon::call`] with another store token (another namespace's).
    pub async fn call_as(&self, token: &str, substore: &str, method: &str, input: Value) -> Reply {
        let body = json!({"substore": substore, "method": method, "input": input}).to_string();
        self.send(&Req::store_as(body.as_bytes(), token).build())
            .await
    }

    /// [`Daemon::ok`] with another store token.
    pub async fn ok_as(&self, token: &str, substore: &str, method: &str, input: Value) -> Value {
        let reply = self.call_as(token, substore, method, input).await;
        assert_eq!(reply.status, 200, "{substore}.{method}: {}", reply.text());
        reply.json()["output"].clone()
    }

    /// One CallCustomTool (JSON codec) with `token`.
    pub async fn tool_as(&self, token: &str, tool: &str, agent_id: &str, args: Value) -> Reply {
        let body = json!({"toolName": tool, "agentId": agent_id, "args": args}).to_string();
        self.send(&Req::tool(body.as_bytes(), token).build()).await
    }

    /// One run API request with `token` (`body`: JSON, for a POST).
    pub async fn api_as(
        &self,
        token: &str,
        method: &'static str,
        path: &str,
        body: Option<Value>,
    ) -> Reply {
        self.send(&Req::api(method, path, token, body).build())
            .await
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A raw HTTP/1.1 request, built header by header (any bytes allowed).
pub struct Req {
    pub method: &'static str,
    pub path: Vec<u8>,
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
    pub body: Vec<u8>,
    pub chunked: bool,
}

impl Req {
    /// A CallStore POST with the JSON content type and the store token.
    pub fn store(body: &[u8]) -> Req {
        Req {
            method: "POST",
            path: STORE_PATH.as_bytes().to_vec(),
            headers: vec![
                (b"content-type".to_vec(), b"application/json".to_vec()),
                (
                    b"authorization".to_vec(),
                    format!("Bearer {STORE_TOKEN}").into_bytes(),
                ),
            ],
            body: body.to_vec(),
            chunked: false,
        }
    }

    /// [`Req::store`] with another store token.
    pub fn store_as(body: &[u8], token: &str) -> Req {
        Req::store(body).header("authorization", Some(format!("Bearer {token}").as_bytes()))
    }

    /// A CallCustomTool POST with the JSON content type and `token`.
    pub fn tool(body: &[u8], token: &str) -> Req {
        Req {
            path: TOOL_PATH.as_bytes().to_vec(),
            ..Req::store_as(body, token)
        }
    }

    /// A run API request (`/v1/...`) with `token`, and a JSON body if one is given.
    pub fn api(method: &'static str, path: &str, token: &str, body: Option<Value>) -> Req {
        let mut headers = vec![(
            b"authorization".to_vec(),
            format!("Bearer {token}").into_bytes(),
        )];
        if body.is_some() {
            headers.push((b"content-type".to_vec(), b"application/json".to_vec()));
        }
        Req {
            method,
            path: path.as_bytes().to_vec(),
            headers,
            body: body.map(|b| b.to_string().into_bytes()).unwrap_or_default(),
            chunked: false,
        }
    }

    /// Replaces (or with `None` removes) a header.
    pub fn header(mut self, name: &str, value: Option<&[u8]>) -> Req {
        self.headers
            .retain(|(n, _)| !n.eq_ignore_ascii_case(name.as_bytes()));
        if let Some(v) = value {
            self.headers.push((name.as_bytes().to_vec(), v.to_vec()));
        }
        self
    }

    pub fn chunked(mut self) -> Req {
        self.chunked = true;
        self
    }

    pub fn build(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.body.len() + 256);
        out.extend_from_slice(self.method.as_bytes());
        out.push(b' ');
        out.extend_from_slice(&self.path);
        out.extend_from_slice(b" HTTP/1.1\r\nhost: 127.0.0.1\r\n");
        for (n, v) in &self.headers {
            out.extend_from_slice(n);
            out.extend_from_slice(b": ");
            out.extend_from_slice(v);
            out.extend_from_slice(b"\r\n");
        }
        if self.chunked {
            out.extend_from_slice(b"transfer-encoding: chunked\r\n\r\n");
            for chunk in self.body.chunks(8192) {
                out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                out.extend_from_slice(chunk);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"0\r\n\r\n");
        } else {
            out.extend_from_slice(
                format!("content-length: {}\r\n\r\n", self.body.len()).as_bytes(),
            );
            out.extend_from_slice(&self.body);
        }
        out
    }
}

/// A whole HTTP response.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.text()))
    }

    /// The Connect error code, if this is a Connect JSON error body.
    pub fn connect_code(&self) -> Option<String> {
        if !self
            .header("content-type")
            .is_some_and(|ct| ct.starts_with("application/json"))
        {
            return None;
        }
        let v: Value = serde_json::from_slice(&self.body).ok()?;
        v.get("message")?;
        Some(v.get("code")?.as_str()?.to_string())
    }
}

/// One client connection, reused for as many requests as the daemon allows.
pub struct Conn {
    stream: AsyncBufReader<TcpStream>,
}

impl Conn {
    pub async fn open(addr: SocketAddr) -> std::io::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream: AsyncBufReader::new(stream),
        })
    }

    /// Writes the bytes and reads one response. `Ok(None)`: the daemon closed the
    /// connection without answering. Errors are resets and the like.
    pub async fn send(&mut self, bytes: &[u8]) -> std::io::Result<Option<Reply>> {
        self.stream.get_mut().write_all(bytes).await?;
        self.read_reply().await
    }

    pub async fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.get_mut().write_all(bytes).await
    }

    /// Reads one response (content-length or chunked body).
    pub async fn read_reply(&mut self) -> std::io::Result<Option<Reply>> {
        let mut line = String::new();
        if self.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        let status: u16 = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad(format!("bad status line {line:?}")))?;
        let mut headers = Vec::new();
        loop {
            line.clear();
            if self.read_line(&mut line).await? == 0 {
                return Err(bad("eof in response headers"));
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let (n, v) = l.split_once(':').ok_or_else(|| bad("bad header"))?;
            headers.push((n.trim().to_string(), v.trim().to_string()));
        }
        let mut reply = Reply {
            status,
            headers,
            body: Vec::new(),
        };
        if reply
            .header("transfer-encoding")
            .is_some_and(|te| te.eq_ignore_ascii_case("chunked"))
        {
            loop {
                line.clear();
                self.read_line(&mut line).await?;
                let size = usize::from_str_radix(line.trim(), 16)
                    .map_err(|_| bad(format!("bad chunk size {line:?}")))?;
                let mut chunk = vec![0; size + 2];
                self.stream.read_exact(&mut chunk).await?;
                if size == 0 {
                    break;
                }
                reply.body.extend_from_slice(&chunk[..size]);
            }
        } else if let Some(len) = reply.header("content-length") {
            let len: usize = len.parse().map_err(|_| bad("bad content-length"))?;
            reply.body = vec![0; len];
            self.stream.read_exact(&mut reply.body).await?;
        }
        Ok(Some(reply))
    }

    async fn read_line(&mut self, line: &mut String) -> std::io::Result<usize> {
        let mut raw = Vec::new();
        let n = (&mut self.stream)
            .take(64 * 1024)
            .read_until(b'\n', &mut raw)
            .await?;
        line.push_str(&String::from_utf8_lossy(&raw));
        Ok(n)
    }

    /// Whether the daemon has closed this connection (EOF or reset) within `wait`.
    pub async fn closed_within(&mut self, wait: Duration) -> bool {
        let mut buf = [0u8; 1024];
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match tokio::time::timeout_at(deadline, self.stream.read(&mut buf)).await {
                Err(_) => return false,
                Ok(Ok(0) | Err(_)) => return true,
                Ok(Ok(_)) => continue, // an answer (e.g. 408): keep reading until closed
            }
        }
    }
}

fn bad(msg: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg.into())
}

/// Everything stored, as one comparable value (read straight from the file).
pub fn snapshot(db: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).expect("open db");
    let mut out = Vec::new();
    for sql in [
        "SELECT ns || agent_id || doc FROM agents ORDER BY 1",
        "SELECT ns || run_id || doc FROM runs ORDER BY 1",
        "SELECT ns || run_id || '/' || seq || payload FROM run_events ORDER BY 1",
        "SELECT ns || blob_id || hex(data) FROM checkpoints ORDER BY 1",
    ] {
        let mut stmt = conn.prepare(sql).expect(sql);
        let rows = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .expect("query");
        out.extend(rows.map(Result::unwrap));
    }
    out
}

/// Every row of namespace `ns` in every table that has a namespace column, as one comparable
/// value (read straight from the file), by table; a table the schema lacks is an error.
pub fn snapshot_ns(db: &Path, ns: &str) -> Vec<(String, Vec<String>)> {
    let conn = rusqlite::Connection::open(db).expect("open db");
    let mut tables: Vec<String> = conn
        .prepare(
            "SELECT m.name FROM sqlite_master m WHERE m.type = 'table' \
             AND EXISTS (SELECT 1 FROM pragma_table_info(m.name) WHERE name = 'ns') ORDER BY 1",
        )
        .expect("list tables")
        .query_map([], |r| r.get(0))
        .expect("query")
        .map(Result::unwrap)
        .collect();
    tables.sort();
    tables
        .into_iter()
        .map(|table| {
            // Every column of each row, blobs as hex, in a stable order.
            let sql = format!("SELECT * FROM \"{table}\" WHERE ns = ?1");
            let mut stmt = conn.prepare(&sql).expect("prepare");
            let columns = stmt.column_count();
            // An approval's lease is renewed while its call waits: time, not a change of data.
            let kept: Vec<usize> = (0..columns)
                .filter(|&i| stmt.column_name(i).is_ok_and(|n| n != "lease_until"))
                .collect();
            let mut rows: Vec<String> = stmt
                .query_map([ns], |r| {
                    let mut row = Vec::with_capacity(columns);
                    for &i in &kept {
                        row.push(match r.get_ref(i)? {
                            rusqlite::types::ValueRef::Null => "NULL".to_string(),
                            rusqlite::types::ValueRef::Integer(v) => v.to_string(),
                            rusqlite::types::ValueRef::Real(v) => format!("{v:?}"),
                            rusqlite::types::ValueRef::Text(t) => {
                                format!("{:?}", String::from_utf8_lossy(t))
                            }
                            rusqlite::types::ValueRef::Blob(b) => {
                                b.iter().map(|x| format!("{x:02x}")).collect()
                            }
                        });
                    }
                    Ok(row.join("|"))
                })
                .expect("query")
                .map(Result::unwrap)
                .collect();
            rows.sort();
            (table, rows)
        })
        .collect()
}

/// `PRAGMA integrity_check` of a database file.
pub fn integrity(db: &Path) -> String {
    let conn = rusqlite::Connection::open(db).expect("open db");
    conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity_check")
}

/// `(seq, payload.i)` of a run's events, in seq order.
pub fn events(db: &Path, run: &str) -> Vec<(u64, u64)> {
    let conn = rusqlite::Connection::open(db).expect("open db");
    let mut stmt = conn
        .prepare("SELECT seq, json_extract(payload, '$.i') FROM run_events WHERE run_id = ?1 ORDER BY seq")
        .expect("prepare");
    let rows = stmt
        .query_map([run], |r| {
            Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64))
        })
        .expect("query");
    rows.map(Result::unwrap).collect()
}

/// An append payload of about `size` bytes carrying index `i`.
pub fn payload(i: u64, size: usize) -> Value {
    json!({"i": i, "pad": "x".repeat(size)})
}
