//! `callbackd import DIR`: a bridge JSONL store directory ([`super::jsonl`]) into callbackd.
//!
//! Everything is read and checked before anything is written, and then written in one
//! transaction: a malformed or partial directory names the file and line and imports
//! nothing. Checked: each line is a record that passes the bridge's own shape check and
//! callbackd's (the same parser as the store calls); each run's events are numbered 1..n with
//! `offset` = `String(seq)` and distinct idempotency keys; runs belong to an agent, events
//! to a run, blobs to an agent, of the directory or of the database. Ids the database
//! already has are refused unless `--replace`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::jsonl;
use super::progress::Progress;
use crate::store::dump::{CheckpointRecord, Dump, DumpCounts, EventRecord};
use crate::store::sqlite::dump::{load, LoadError, MissingIn};
use crate::store::sqlite::SqliteOptions;
use crate::store::{Namespace, StoreCall};

/// Why an import wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{0} does not exist or is not a directory")]
    NoDirectory(PathBuf),
    #[error(
        "{0} is not a bridge JSONL store: it has none of agents.ndjson, runs.ndjson, \
         run_events.ndjson, checkpoints.ndjson"
    )]
    NotAStore(PathBuf),
    #[error("cannot read {path}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A line that is not a valid record; `line` counts from 1.
    #[error("{file} line {line}: {why}; nothing was imported")]
    Malformed {
        file: &'static str,
        line: usize,
        why: String,
    },
    #[error(transparent)]
    Load(#[from] LoadError),
}

/// The records of a directory, with the line each came from.
struct Read {
    dump: Dump,
    lines: Lines,
}

/// The line numbers of the records of each file, in the order of the dump's lists.
#[derive(Default)]
struct Lines {
    agents: Vec<usize>,
    runs: Vec<usize>,
    events: Vec<usize>,
    checkpoints: Vec<usize>,
}

/// Imports the JSONL store in `dir` into namespace `ns` of the database of `opts`.
pub fn import(
    opts: &SqliteOptions,
    ns: &Namespace,
    dir: &Path,
    replace: bool,
) -> Result<DumpCounts, ImportError> {
    let read = read_dir(dir)?;
    let lines = &read.lines;
    let counts = load(opts, ns.as_str(), &read.dump, replace, |missing| {
        let (file, lines, m, kind) = match missing {
            MissingIn::Runs(m) => (jsonl::RUNS, &lines.runs, m, "run"),
            MissingIn::Events(m) => (jsonl::RUN_EVENTS, &lines.events, m, "event"),
            MissingIn::Checkpoints(m) => {
                (jsonl::CHECKPOINTS, &lines.checkpoints, m, "checkpoint blob")
            }
        };
        format!(
            "{file} line {}: the {kind} belongs to {}, which is neither in the directory nor in \
             the database (a partial directory?); nothing was imported",
            lines[m.index], m.what
        )
    })?;
    Ok(counts)
}

/// `callbackd import`: [`import`] into namespace `ns`, with a summary line.
pub fn command(
    opts: &SqliteOptions,
    ns: &Namespace,
    dir: &Path,
    replace: bool,
) -> anyhow::Result<()> {
    let line = Progress::new("import");
    let counts = import(opts, ns, dir, replace)?;
    line.finish(&format!(
        "{counts} imported into namespace {} of {} from {}",
        ns.as_str(),
        opts.path.display(),
        dir.display()
    ));
    Ok(())
}

fn read_dir(dir: &Path) -> Result<Read, ImportError> {
    if !dir.is_dir() {
        return Err(ImportError::NoDirectory(dir.to_path_buf()));
    }
    let mut texts = Vec::new();
    for name in jsonl::FILES {
        let path = dir.join(name);
        texts.push(match std::fs::read_to_string(&path) {
            Ok(text) => Some(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => return Err(ImportError::Io { path, source }),
        });
    }
    if texts.iter().all(Option::is_none) {
        return Err(ImportError::NotAStore(dir.to_path_buf()));
    }
    let text = |i: usize| texts[i].as_deref().unwrap_or("");
    let mut read = Read {
        dump: Dump::default(),
        lines: Lines::default(),
    };
    for (line, _, raw) in records(jsonl::AGENTS, text(0), jsonl::check_agent)? {
        let call = StoreCall::parse("agents", "create", &format!(r#"{{"agent":{raw}}}"#));
        match call {
            Ok(StoreCall::AgentsCreate(doc)) => read.dump.agents.push(doc),
            Ok(_) => unreachable!("agents.create parses to AgentsCreate"),
            Err(e) => return Err(malformed(jsonl::AGENTS, line, e.to_string())),
        }
        read.lines.agents.push(line);
    }
    for (line, _, raw) in records(jsonl::RUNS, text(1), jsonl::check_run)? {
        match StoreCall::parse("runs", "create", &format!(r#"{{"run":{raw}}}"#)) {
            Ok(StoreCall::RunsCreate(doc)) => read.dump.runs.push(doc),
            Ok(_) => unreachable!("runs.create parses to RunsCreate"),
            Err(e) => return Err(malformed(jsonl::RUNS, line, e.to_string())),
        }
        read.lines.runs.push(line);
    }
    for (line, value, raw) in records(jsonl::RUN_EVENTS, text(2), jsonl::check_event)? {
        read.dump
            .events
            .push(event(&value, raw).map_err(|why| malformed(jsonl::RUN_EVENTS, line, why))?);
        read.lines.events.push(line);
    }
    for (line, value, _) in records(jsonl::CHECKPOINTS, text(3), jsonl::check_checkpoint)? {
        let data = value["dataBase64"].as_str().unwrap_or_default();
        let input = serde_json::json!({
            "agentId": value["agentId"], "blobId": value["blobId"], "data": data,
        });
        match StoreCall::parse("checkpoints", "create", &input.to_string()) {
            Ok(StoreCall::CheckpointsCreate {
                agent_id,
                blob_id,
                data,
            }) => read.dump.checkpoints.push(CheckpointRecord {
                agent_id,
                blob_id,
                data,
            }),
            Ok(_) => unreachable!("checkpoints.create parses to CheckpointsCreate"),
            Err(e) => {
                let why = e.to_string().replace("input.data", "dataBase64");
                return Err(malformed(jsonl::CHECKPOINTS, line, why));
            }
        }
        read.lines.checkpoints.push(line);
    }
    check_unique(&read)?;
    check_numbering(&read)?;
    Ok(read)
}

fn malformed(file: &'static str, line: usize, why: String) -> ImportError {
    ImportError::Malformed { file, line, why }
}

/// The non-blank lines of `text` as (line number, parsed value, raw text), each checked.
fn records<'a>(
    file: &'static str,
    text: &'a str,
    check: fn(&Value) -> Result<(), String>,
) -> Result<Vec<(usize, Value, &'a str)>, ImportError> {
    let mut out = Vec::new();
    let ends_with_newline = text.is_empty() || text.ends_with('\n');
    let count = text.lines().count();
    for (i, raw) in text.lines().enumerate() {
        let raw = raw.trim();
        if raw.is_empty() {
            continue;
        }
        let line = i + 1;
        let value: Value = match serde_json::from_str(raw) {
            Ok(v) => v,
            Err(e) if line == count && !ends_with_newline => {
                return Err(malformed(
                    file,
                    line,
                    format!("the file ends in the middle of a record, a partial write? ({e})"),
                ))
            }
            Err(e) => return Err(malformed(file, line, format!("not valid JSON: {e}"))),
        };
        check(&value).map_err(|why| malformed(file, line, why))?;
        out.push((line, value, raw));
    }
    Ok(out)
}

/// An event line (already through the bridge's check) as a record.
fn event(v: &Value, raw: &str) -> Result<EventRecord, String> {
    let seq = v["seq"]
        .as_u64()
        .filter(|s| *s >= 1)
        .ok_or("seq must be a whole number from 1")?;
    if v["offset"].as_str() != Some(seq.to_string().as_str()) {
        return Err(format!("offset {} does not match seq {seq}", v["offset"]));
    }
    let created = v["createdAt"].as_str().unwrap_or_default();
    let created_at_ms = jsonl::ms_from_iso(created)
        .ok_or_else(|| format!("createdAt {created:?} is not an ISO 8601 time"))?;
    let call = StoreCall::parse("runEvents", "append", raw).map_err(|e| e.to_string())?;
    let StoreCall::EventsAppend(ev) = call else {
        unreachable!("runEvents.append parses to EventsAppend")
    };
    Ok(EventRecord {
        run_id: ev.run_id,
        seq,
        event_type: ev.event_type,
        payload: ev.payload,
        payload_ref: ev.payload_ref,
        idempotency_key: ev.idempotency_key,
        created_at_ms,
    })
}

/// No id twice within a file.
fn check_unique(read: &Read) -> Result<(), ImportError> {
    let mut seen = HashSet::new();
    for (a, line) in read.dump.agents.iter().zip(&read.lines.agents) {
        if !seen.insert(a.agent_id.as_str()) {
            return Err(malformed(
                jsonl::AGENTS,
                *line,
                format!("agent {} appears twice", a.agent_id),
            ));
        }
    }
    let mut seen = HashSet::new();
    for (r, line) in read.dump.runs.iter().zip(&read.lines.runs) {
        if !seen.insert((r.agent_id.as_str(), r.run_id.as_str())) {
            return Err(malformed(
                jsonl::RUNS,
                *line,
                format!("run {} appears twice", r.run_id),
            ));
        }
    }
    let mut seen = HashSet::new();
    for (c, line) in read.dump.checkpoints.iter().zip(&read.lines.checkpoints) {
        if !seen.insert((c.agent_id.as_str(), c.blob_id.as_str())) {
            return Err(malformed(
                jsonl::CHECKPOINTS,
                *line,
                format!(
                    "checkpoint blob {} of agent {} appears twice",
                    c.blob_id, c.agent_id
                ),
            ));
        }
    }
    Ok(())
}

/// Each run's events are numbered 1..n without a repeat or a hole, and no non-empty
/// idempotency key repeats within a run.
fn check_numbering(read: &Read) -> Result<(), ImportError> {
    let mut by_run: HashMap<&str, Vec<(u64, usize)>> = HashMap::new();
    let mut keys = HashSet::new();
    for (e, line) in read.dump.events.iter().zip(&read.lines.events) {
        by_run.entry(&e.run_id).or_default().push((e.seq, *line));
        if let Some(key) = e.idempotency_key.as_deref().filter(|k| !k.is_empty()) {
            if !keys.insert((e.run_id.as_str(), key)) {
                return Err(malformed(
                    jsonl::RUN_EVENTS,
                    *line,
                    format!("idempotencyKey {key:?} is used twice in run {}", e.run_id),
                ));
            }
        }
    }
    for (run, mut seqs) in by_run {
        seqs.sort_unstable();
        for (i, (seq, line)) in seqs.iter().enumerate() {
            let want = i as u64 + 1;
            if *seq != want {
                let why = if *seq < want {
                    format!("run {run} has seq {seq} twice")
                } else {
                    format!("run {run} has no event with seq {want} (the next is {seq}): its events must be numbered 1, 2, 3, ...")
                };
                return Err(malformed(jsonl::RUN_EVENTS, *line, why));
            }
        }
    }
    Ok(())
}
