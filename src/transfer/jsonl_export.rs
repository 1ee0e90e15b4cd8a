//! `callbackd export DIR`: the store in the bridge's JSONL layout ([`super::jsonl`]), so
//! that the bridge can be started on it with
//! `--local-store '{"type":"jsonl","rootDir":"DIR"}'`.
//!
//! Read from one snapshot of the store, SQLite or PostgreSQL (the daemons may go on
//! serving); the same data gives the same bytes from either backend. DIR must be new or
//! empty; all four files are written (an empty one for an empty substore), fsynced, and
//! removed again if the export fails. The `memory` tool's notes have no place in the layout
//! and are not exported.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use base64::Engine;

use super::jsonl::{self, one_line};
use super::progress::Progress;
use crate::store::backend::BackendOptions;
use crate::store::dump::{CheckpointRecord, DumpCounts, DumpSink, EventRecord};
use crate::store::postgres::{dump as pg_dump, PgOptions};
use crate::store::sqlite::dump as sqlite_dump;
use crate::store::{AgentDoc, Namespace, RunDoc};

/// Why an export failed. A failed export leaves DIR as it found it.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("database {0} does not exist")]
    NoDatabase(PathBuf),
    #[error("{0} is not empty; export into a new or empty directory")]
    NotEmpty(PathBuf),
    #[error("{0} exists and is not a directory")]
    NotADirectory(PathBuf),
    #[error("cannot write {path}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("reading the database")]
    Store(#[source] rusqlite::Error),
    /// A column of the SQLite database that is not of its type.
    #[error("reading the database")]
    Row(#[source] crate::store::StoreError),
    /// Connecting to or reading the PostgreSQL store (the message names it).
    #[error(transparent)]
    Postgres(pg_dump::ReadError<std::convert::Infallible>),
    /// A stored record the bridge's JSONL store would reject as corrupt.
    #[error("{what} cannot be written in the bridge's JSONL layout: {why}")]
    Unfit { what: String, why: String },
}

/// Exports namespace `ns` of the SQLite database at `db` into `dir`.
pub fn export(db: &Path, ns: &Namespace, dir: &Path) -> Result<DumpCounts, ExportError> {
    if !db.is_file() {
        return Err(ExportError::NoDatabase(db.to_path_buf()));
    }
    let mut files = Files::begin(dir)?;
    let result = sqlite_dump::read_all(db, ns.as_str(), &mut files).map_err(|e| match e {
        sqlite_dump::ReadError::Store(e) => ExportError::Store(e),
        sqlite_dump::ReadError::Row(e) => ExportError::Row(e),
        sqlite_dump::ReadError::Sink(e) => e,
    });
    files.end(result)
}

/// Exports namespace `ns` of the PostgreSQL store of `opts` into `dir`.
pub async fn export_pg(
    opts: &PgOptions,
    ns: &Namespace,
    dir: &Path,
) -> Result<DumpCounts, ExportError> {
    let mut files = Files::begin(dir)?;
    let result = pg_dump::read_all(opts, ns.as_str(), &mut files)
        .await
        .map_err(|e| e.split().map_or_else(|sink| sink, ExportError::Postgres));
    files.end(result)
}

/// [`export`] or [`export_pg`], by the store's backend (SQLite's blocking read runs off
/// the async runtime).
pub async fn export_from(
    backend: &BackendOptions,
    ns: &Namespace,
    dir: &Path,
) -> Result<DumpCounts, ExportError> {
    match backend {
        BackendOptions::Sqlite(opts) => {
            let (db, ns, dir) = (opts.path.clone(), ns.clone(), dir.to_path_buf());
            tokio::task::spawn_blocking(move || export(&db, &ns, &dir))
                .await
                .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
        }
        BackendOptions::Postgres(opts) => export_pg(opts, ns, dir).await,
    }
}

/// `callbackd export`: [`export_from`] the store, namespace `ns`, with a summary line.
pub async fn command(backend: &BackendOptions, ns: &Namespace, dir: &Path) -> anyhow::Result<()> {
    let line = Progress::new("export");
    let counts = export_from(backend, ns, dir).await?;
    line.finish(&format!(
        "namespace {}: {counts} written to {}",
        ns.as_str(),
        dir.display()
    ));
    Ok(())
}

fn prepare_dir(dir: &Path) -> Result<(), ExportError> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(ExportError::NotEmpty(dir.to_path_buf()));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|source| ExportError::Io {
                path: dir.to_path_buf(),
                source,
            })
        }
        Err(_) if dir.exists() => Err(ExportError::NotADirectory(dir.to_path_buf())),
        Err(source) => Err(ExportError::Io {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

/// The four files being written.
struct Files {
    dir: PathBuf,
    agents: BufWriter<File>,
    runs: BufWriter<File>,
    events: BufWriter<File>,
    checkpoints: BufWriter<File>,
}

impl Files {
    /// The four files, created in `dir`, which must be new or empty.
    fn begin(dir: &Path) -> Result<Files, ExportError> {
        prepare_dir(dir)?;
        Files::create(dir)
    }

    /// The files flushed and synced after a read that went well; removed after one that
    /// did not.
    fn end(self, read: Result<DumpCounts, ExportError>) -> Result<DumpCounts, ExportError> {
        let dir = self.dir.clone();
        let result = read.and_then(|counts| self.finish().map(|()| counts));
        if result.is_err() {
            for name in jsonl::FILES {
                let _ = std::fs::remove_file(dir.join(name));
            }
        }
        result
    }

    fn create(dir: &Path) -> Result<Files, ExportError> {
        let open = |name: &str| -> Result<BufWriter<File>, ExportError> {
            let path = dir.join(name);
            // Mode 0600: agent documents carry their blob encryption keys.
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .map(|f| BufWriter::with_capacity(256 * 1024, f))
                .map_err(|source| ExportError::Io { path, source })
        };
        Ok(Files {
            dir: dir.to_path_buf(),
            agents: open(jsonl::AGENTS)?,
            runs: open(jsonl::RUNS)?,
            events: open(jsonl::RUN_EVENTS)?,
            checkpoints: open(jsonl::CHECKPOINTS)?,
        })
    }

    fn finish(self) -> Result<(), ExportError> {
        let dir = self.dir.clone();
        for (name, w) in [
            (jsonl::AGENTS, self.agents),
            (jsonl::RUNS, self.runs),
            (jsonl::RUN_EVENTS, self.events),
            (jsonl::CHECKPOINTS, self.checkpoints),
        ] {
            let path = dir.join(name);
            let file = w.into_inner().map_err(|e| ExportError::Io {
                path: path.clone(),
                source: e.into_error(),
            })?;
            file.sync_all()
                .map_err(|source| ExportError::Io { path, source })?;
        }
        File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(|source| ExportError::Io { path: dir, source })
    }
}

fn write_line(
    w: &mut BufWriter<File>,
    dir: &Path,
    name: &str,
    line: &str,
) -> Result<(), ExportError> {
    w.write_all(line.as_bytes())
        .and_then(|()| w.write_all(b"\n"))
        .map_err(|source| ExportError::Io {
            path: dir.join(name),
            source,
        })
}

/// A stored document, on one line, that passes the bridge's check.
fn fit(
    json: &str,
    check: fn(&serde_json::Value) -> Result<(), String>,
    what: impl Fn() -> String,
) -> Result<String, ExportError> {
    let line = one_line(json).into_owned();
    let value: serde_json::Value = serde_json::from_str(&line).map_err(|e| ExportError::Unfit {
        what: what(),
        why: format!("the stored document is not valid JSON: {e}"),
    })?;
    check(&value).map_err(|why| ExportError::Unfit { what: what(), why })?;
    Ok(line)
}

impl DumpSink for Files {
    type Error = ExportError;

    fn agent(&mut self, doc: AgentDoc) -> Result<(), ExportError> {
        let line = fit(doc.json.as_str(), jsonl::check_agent, || {
            format!("agent {}", doc.agent_id)
        })?;
        write_line(&mut self.agents, &self.dir, jsonl::AGENTS, &line)
    }

    fn run(&mut self, doc: RunDoc) -> Result<(), ExportError> {
        let line = fit(doc.json.as_str(), jsonl::check_run, || {
            format!("run {}", doc.run_id)
        })?;
        write_line(&mut self.runs, &self.dir, jsonl::RUNS, &line)
    }

    fn event(&mut self, e: EventRecord) -> Result<(), ExportError> {
        let s = |v: &str| serde_json::to_string(v).expect("strings serialise");
        let opt = |v: &Option<String>| v.as_deref().map_or_else(|| "null".to_string(), s);
        // The key order of the bridge's own records.
        let line = format!(
            r#"{{"runId":{},"seq":{},"offset":"{}","eventType":{},"payload":{},"payloadRef":{},"idempotencyKey":{},"createdAt":"{}"}}"#,
            s(&e.run_id),
            e.seq,
            e.seq,
            s(&e.event_type),
            one_line(e.payload.as_str()),
            opt(&e.payload_ref),
            opt(&e.idempotency_key),
            jsonl::iso_from_ms(e.created_at_ms)
        );
        write_line(&mut self.events, &self.dir, jsonl::RUN_EVENTS, &line)
    }

    fn checkpoint(&mut self, c: CheckpointRecord) -> Result<(), ExportError> {
        let line = serde_json::json!({
            "agentId": c.agent_id,
            "blobId": c.blob_id,
            "dataBase64": base64::engine::general_purpose::STANDARD.encode(&c.data),
        })
        .to_string();
        write_line(&mut self.checkpoints, &self.dir, jsonl::CHECKPOINTS, &line)
    }
}
