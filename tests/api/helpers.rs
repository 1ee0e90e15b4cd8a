//! `TestApp`: the real `App` on a random loopback port, with a temp-dir database and fresh
//! tokens, served until dropped. One method per RPC; a raw request method for bad input.
//!
//! The backend comes from the environment, so that the same suite runs against each:
//! `CALLBACKD_TEST_BACKEND=postgres CALLBACKD_TEST_PG_URL=postgres://...` runs every test
//! on PostgreSQL, each in a schema of its own (dropped with the test); unset, SQLite.

#![allow(dead_code)]

use std::net::SocketAddr;

use bytes::Bytes;
use callbackd::app::AppBuilder;
use callbackd::config::Config;
use callbackd::App;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use prost::Message;
use serde_json::{json, Value};
use tokio::net::TcpStream;

pub const STORE_PATH: &str = "/sdk.v1.SdkStoreCallbackService/CallStore";
pub const TOOL_PATH: &str = "/sdk.v1.SdkCustomToolCallbackService/CallCustomTool";

pub struct TestApp {
    pub addr: SocketAddr,
    pub store_token: String,
    pub tool_token: String,
    pub api_token: String,
    pub api_read_token: String,
    pub dir: tempfile::TempDir,
    pub db: std::path::PathBuf,
    /// The PostgreSQL schema of this test (`None` on SQLite).
    pub pg: Option<PgTarget>,
    /// The daemon's store (for `subscribe`).
    pub store: std::sync::Arc<dyn callbackd::Store>,
    /// Reloads namespaces and tokens, as SIGHUP does.
    pub reloader: callbackd::app::reload::Reloader,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
}

/// Which backend the tests run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// `CALLBACKD_TEST_BACKEND`: `sqlite` (default) or `postgres`. Anything else, or postgres
/// without `CALLBACKD_TEST_PG_URL`, fails the test: a misconfigured run must not pass by
/// quietly testing SQLite.
pub fn backend() -> Backend {
    match std::env::var("CALLBACKD_TEST_BACKEND").as_deref() {
        Err(_) | Ok("") | Ok("sqlite") => Backend::Sqlite,
        Ok("postgres") => {
            assert!(
                std::env::var("CALLBACKD_TEST_PG_URL").is_ok_and(|u| !u.is_empty()),
                "CALLBACKD_TEST_BACKEND=postgres needs CALLBACKD_TEST_PG_URL=postgres://..."
            );
            Backend::Postgres
        }
        Ok(other) => panic!("CALLBACKD_TEST_BACKEND={other:?}: expected sqlite or postgres"),
    }
}

/// A test's own schema on the PostgreSQL test server.
#[derive(Debug, Clone)]
pub struct PgTarget {
    pub url: String,
    pub schema: String,
}

impl PgTarget {
    /// The schema kept in `dir` (a restart on the same directory uses the same one), or a
    /// new unique name.
    pub fn for_dir(dir: &std::path::Path) -> PgTarget {
        let url = std::env::var("CALLBACKD_TEST_PG_URL").expect("CALLBACKD_TEST_PG_URL");
        let file = dir.join("pg-schema");
        let schema = match std::fs::read_to_string(&file) {
            Ok(s) => s,
            Err(_) => {
                static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .subsec_nanos();
                let s = format!("cbdtest_{}_{n}_{nanos}", std::process::id());
                std::fs::write(&file, &s).unwrap();
                s
            }
        };
        PgTarget { url, schema }
    }

    /// Points `config` at this schema. `CALLBACKD_TEST_PG_PREPARED=false` runs the suite
    /// with unprepared statements (as behind a transaction-mode pooler).
    pub fn apply(&self, config: &mut Config) {
        config.store.set_location(&self.url);
        config.store.schema = Some(self.schema.clone());
        if std::env::var("CALLBACKD_TEST_PG_PREPARED").as_deref() == Ok("false") {
            config.store.prepared_statements = false;
        }
    }

    /// A connection with this schema on its search path.
    pub async fn connect(&self) -> tokio_postgres::Client {
        let (client, conn) = tokio_postgres::connect(&self.url, tokio_postgres::NoTls)
            .await
            .expect("connect to the test PostgreSQL");
        tokio::spawn(conn);
        client
            .batch_execute(&format!("SET search_path TO \"{}\"", self.schema))
            .await
            .unwrap();
        client
    }

    /// Drops the schema (from a thread of its own: this runs in `Drop`).
    pub fn drop_schema(&self) {
        let target = self.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                if let Ok((client, conn)) =
                    tokio_postgres::connect(&target.url, tokio_postgres::NoTls).await
                {
                    tokio::spawn(conn);
                    let _ = client
                        .batch_execute(&format!(
                            "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
                            target.schema
                        ))
                        .await;
                }
            });
        })
        .join();
    }
}

/// An HTTP response, whole.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub content_type: String,
    pub body: Bytes,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }

    /// The Connect error code of an error response.
    pub fn code(&self) -> String {
        assert_ne!(
            self.status,
            200,
            "expected an error, got 200: {}",
            self.text()
        );
        assert!(
            self.content_type.starts_with("application/json"),
            "{self:?}"
        );
        self.json()["code"].as_str().expect("code").to_string()
    }

    pub fn message(&self) -> String {
        self.json()["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// How a request body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `Transfer-Encoding: chunked`, no length: what the bridge sends.
    Chunked,
    ContentLength,
}

impl TestApp {
    pub async fn spawn() -> TestApp {
        Self::spawn_with(|_| {}).await
    }

    /// Spawns on SQLite whatever the backend of the run: for the features of a SQLite file
    /// (backup, export/import of the file, its sizes in the metrics).
    pub async fn spawn_sqlite() -> TestApp {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("test.db");
        Self::spawn_in(dir, move |c| {
            c.store.set_location(&db.to_string_lossy());
            c.store.schema = None;
        })
        .await
    }

    /// Spawns with a config tweak applied over the test defaults.
    pub async fn spawn_with(tweak: impl FnOnce(&mut Config)) -> TestApp {
        let dir = tempfile::tempdir().expect("temp dir");
        Self::spawn_in(dir, tweak).await
    }

    /// Spawns on an existing directory (to restart on the same database).
    pub async fn spawn_in(dir: tempfile::TempDir, tweak: impl FnOnce(&mut Config)) -> TestApp {
        Self::spawn_built(dir, tweak, |b| b).await
    }

    /// Spawns with a config tweak and additions to the builder (plugin tools).
    pub async fn spawn_built(
        dir: tempfile::TempDir,
        tweak: impl FnOnce(&mut Config),
        extend: impl FnOnce(AppBuilder) -> AppBuilder,
    ) -> TestApp {
        if std::env::var_os("TEST_LOG").is_some() {
            callbackd::telemetry::init(&Default::default());
        }
        let db = dir.path().join("test.db");
        let mut config = Config::default();
        config.server.listen = "127.0.0.1:0".into();
        config.store.path = db.clone();
        let pg = (backend() == Backend::Postgres).then(|| PgTarget::for_dir(dir.path()));
        if let Some(pg) = &pg {
            pg.apply(&mut config);
        }
        tweak(&mut config);
        // A test that chose a SQLite file itself (a SQLite-only feature) is on SQLite.
        let pg = pg.filter(|_| config.store.backend == callbackd::config::BackendKind::Postgres);
        let app = extend(App::builder(config))
            .build()
            .await
            .expect("app builds");
        let addr = app.local_addr();
        let store = app.store();
        let reloader = app.reloader();
        let store_token = app.tokens().store.expose().to_string();
        let tool_token = app.tokens().tool.expose().to_string();
        let api_token = app.tokens().api.expose().to_string();
        let api_read_token = app
            .tokens()
            .api_read
            .as_ref()
            .map(|t| t.expose().to_string())
            .unwrap_or_default();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            app.run_until(async {
                let _ = rx.await;
            })
            .await
            .expect("server runs");
        });
        TestApp {
            addr,
            store_token,
            tool_token,
            api_token,
            api_read_token,
            dir,
            db,
            pg,
            store,
            reloader,
            shutdown: Some(tx),
            server: Some(server),
        }
    }

    /// Stops the server and waits for it to drain; returns the directory for a restart.
    pub async fn stop(mut self) -> tempfile::TempDir {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(server) = self.server.take() {
            server.await.expect("server task");
        }
        // The schema goes on with the directory (a restart on it uses it again).
        self.pg = None;
        let dir = tempfile::tempdir().expect("temp dir");
        std::mem::replace(&mut self.dir, dir)
    }

    /// A raw POST (or other method) with the given headers and body framing.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
        framing: Framing,
    ) -> Resp {
        let stream = TcpStream::connect(self.addr).await.expect("connect");
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .expect("handshake");
        tokio::spawn(conn);
        let mut builder = http::Request::builder()
            .method(method)
            .uri(path)
            .header("host", self.addr.to_string());
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        let body: Bytes = body.into();
        let resp = match framing {
            Framing::ContentLength => {
                let req = builder.body(Full::new(body).boxed()).expect("request");
                sender.send_request(req).await
            }
            Framing::Chunked => {
                let stream = futures_util::stream::iter(vec![Ok::<_, std::convert::Infallible>(
                    Frame::data(body),
                )]);
                let req = builder
                    .body(StreamBody::new(stream).boxed())
                    .expect("request");
                sender.send_request(req).await
            }
        }
        .expect("response");
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap_or_default().to_string())
            .unwrap_or_default();
        let body = resp.into_body().collect().await.expect("body").to_bytes();
        Resp {
            status,
            content_type,
            body,
        }
    }

    /// Session `a1` whose active run `r1` is running, as the bridge stores them before a
    /// turn's tool calls.
    pub async fn running_run_r1(&self) {
        let mut a = agent("a1", "/ws", 1_780_000_000_000);
        a["activeRunId"] = json!("r1");
        self.store_ok("agents", "create", json!({"agent": a})).await;
        let mut r = run("a1", "r1", 1);
        r["status"] = json!("running");
        self.store_ok("runs", "create", json!({"run": r})).await;
    }

    /// CallCustomTool as the bridge makes it (JSON, chunked) with `tool_token`; asserts a
    /// `200` and gives the call's `result`.
    pub async fn call_tool_as(&self, tool_token: &str, body: &Value) -> Value {
        let auth = format!("Bearer {tool_token}");
        let r = self
            .request(
                "POST",
                TOOL_PATH,
                &[
                    ("content-type", "application/json"),
                    ("authorization", &auth),
                ],
                body.to_string(),
                Framing::Chunked,
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()["result"].clone()
    }

    /// CallStore with the JSON codec, framed like the bridge (chunked).
    pub async fn call_store(&self, substore: &str, method: &str, input: Value) -> Resp {
        self.call_store_framed(substore, method, input, Framing::Chunked)
            .await
    }

    pub async fn call_store_framed(
        &self,
        substore: &str,
        method: &str,
        input: Value,
        framing: Framing,
    ) -> Resp {
        let body = json!({"substore": substore, "method": method, "input": input}).to_string();
        self.store_raw(body, framing).await
    }

    /// CallStore with a raw JSON body, the store token and the bridge's headers.
    pub async fn store_raw(&self, body: impl Into<Bytes>, framing: Framing) -> Resp {
        let auth = format!("Bearer {}", self.store_token);
        self.request(
            "POST",
            STORE_PATH,
            &[
                ("content-type", "application/json"),
                ("connect-protocol-version", "1"),
                ("authorization", &auth),
            ],
            body,
            framing,
        )
        .await
    }

    /// CallStore that must succeed; returns `output` (None when unset).
    pub async fn store_ok(&self, substore: &str, method: &str, input: Value) -> Option<Value> {
        let resp = self.call_store(substore, method, input).await;
        assert_eq!(resp.status, 200, "{substore}.{method}: {}", resp.text());
        assert_eq!(resp.content_type, "application/json");
        let body = resp.json();
        match body.get("output") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.clone()),
        }
    }

    /// CallStore that must fail; returns (code, message).
    pub async fn store_err(&self, substore: &str, method: &str, input: Value) -> (String, String) {
        let resp = self.call_store(substore, method, input).await;
        (resp.code(), resp.message())
    }

    /// CallStore with the binary protobuf codec; returns `output` as JSON (None when unset).
    pub async fn store_proto(
        &self,
        substore: &str,
        method: &str,
        input: Value,
    ) -> Result<Option<Value>, Resp> {
        let req = callbackd::proto::CallStoreRequest {
            substore: substore.into(),
            method: method.into(),
            input: callbackd::rpc::codec::json_to_struct(&input),
        };
        let auth = format!("Bearer {}", self.store_token);
        let resp = self
            .request(
                "POST",
                STORE_PATH,
                &[
                    ("content-type", "application/proto"),
                    ("authorization", &auth),
                ],
                req.encode_to_vec(),
                Framing::Chunked,
            )
            .await;
        if resp.status != 200 {
            return Err(resp);
        }
        assert_eq!(resp.content_type, "application/proto");
        let out =
            callbackd::proto::CallStoreResponse::decode(resp.body.clone()).expect("proto response");
        Ok(out
            .output
            .map(|s| callbackd::rpc::codec::struct_to_json(&s).expect("json")))
    }

    /// A number, straight from the database (SQL both backends understand).
    pub async fn count(&self, sql: &str) -> i64 {
        match &self.pg {
            None => {
                let conn = rusqlite::Connection::open(&self.db).expect("open db");
                conn.query_row(sql, [], |r| r.get(0)).expect("count")
            }
            Some(pg) => pg
                .connect()
                .await
                .query_one(&format!("SELECT ({sql})::int8"), &[])
                .await
                .expect("count")
                .get(0),
        }
    }

    /// Text rows, straight from the database; `sqlite` and `postgres` are the same query
    /// in each dialect.
    pub async fn rows(&self, sqlite: &str, postgres: &str) -> Vec<String> {
        match &self.pg {
            None => {
                let conn = rusqlite::Connection::open(&self.db).expect("open db");
                let mut stmt = conn.prepare(sqlite).unwrap();
                let rows = stmt.query_map([], |r| r.get::<_, String>(0)).unwrap();
                rows.map(Result::unwrap).collect()
            }
            Some(pg) => pg
                .connect()
                .await
                .query(postgres, &[])
                .await
                .expect("rows")
                .iter()
                .map(|r| r.get(0))
                .collect(),
        }
    }

    /// Runs a statement straight on the database, bypassing the daemon (to corrupt data).
    pub async fn exec(&self, sqlite: &str, postgres: &str) {
        match &self.pg {
            None => {
                let conn = rusqlite::Connection::open(&self.db).expect("open db");
                conn.execute_batch(sqlite).unwrap();
            }
            Some(pg) => pg.connect().await.batch_execute(postgres).await.unwrap(),
        }
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(pg) = self.pg.take() {
            pg.drop_schema();
        }
    }
}

/// A minimal agent document.
pub fn agent(id: &str, cwd: &str, updated_at: i64) -> Value {
    json!({
        "agentId": id, "cwd": cwd, "status": "idle", "activeRunId": null, "name": "New Agent",
        "createdAt": updated_at, "updatedAt": updated_at,
        "sdkMetadata": {"blobEncryptionKey": "00ff".repeat(16)}
    })
}

/// A run document as the bridge sends it (every key, nulls included).
pub fn run(agent_id: &str, run_id: &str, turn: i64) -> Value {
    json!({
        "runId": run_id, "requestId": null, "agentId": agent_id, "turnNumber": turn,
        "status": "queued", "model": {"id": "composer-2"}, "result": null, "error": null,
        "usageRef": null, "usage": null, "createdAt": 1_780_000_000_000i64 + turn,
        "updatedAt": 1_780_000_000_000i64 + turn, "startedAt": null, "endedAt": null,
        "startCheckpointRef": null, "latestCheckpointRef": null
    })
}

/// The token of `role` (`store`, `tool`, `api`, `read`) of namespace `q` ([`namespace_q`]).
pub fn q_token(role: &str) -> String {
    format!("q-{role}-token-0123456789abcdef")
}

/// A second namespace `q`, with every token ([`q_token`]) and at most `max_agents` agents.
pub fn namespace_q(max_agents: i64) -> callbackd::namespaces::NamespaceConfig {
    use callbackd::secret::Secret;
    let mut q = callbackd::namespaces::NamespaceConfig {
        name: "q".into(),
        store_token: Some(Secret::new(q_token("store"))),
        tool_token: Some(Secret::new(q_token("tool"))),
        api_token: Some(Secret::new(q_token("api"))),
        api_read_token: Some(Secret::new(q_token("read"))),
        ..Default::default()
    };
    q.quotas.max_agents = Some(max_agents);
    q
}

/// A `deploy` command tool every call of which is held for a person's approval; once
/// approved it answers `{"deployed": true}`.
pub fn held_deploy_tool() -> callbackd::config::CommandToolConfig {
    toml::from_str(
        r#"
name = "deploy"
description = "Deploys"
argv = ["sh", "-c", "echo '{\"deployed\": true}'"]
input_schema = { type = "object", properties = { env = { type = "string" } } }
approval = "always"
"#,
    )
    .unwrap()
}
