//! The client commands' glue: resolve the URL and the token, call, print.
//!
//! URL: `--url`, else `CALLBACKD_URL`, else a listen address the user chose, else a running
//! daemon's runtime file, else the default listen address (`discover`). Token: `--token`,
//! else `CALLBACKD_API_TOKEN`, else (with `--namespace N`) N's `api_token` in the
//! configuration, else `[api] token` / `token_file` of the configuration, else
//! `api_token` in the tokens file the daemon generated next to its database. Output: one line per item; `--json` prints the API's own JSON, one object
//! per line.

use std::io::{IsTerminal, Write};

use anyhow::Context;
use serde_json::Value;

use super::discover::connect;
use super::follow::{encode, follow, FollowError, FollowOptions, Followed, Sink};
use super::http::ApiClient;
use super::render::{self, Style};
use super::table::{self, Table};
use crate::cli::{ApprovalsArgs, DecideArgs, FollowArgs, RunsArgs, SessionsArgs};

/// `callbackd follow RUN_ID`. Exit status: 0 when the run finished, 1 otherwise.
pub fn follow_command(args: &FollowArgs) -> anyhow::Result<()> {
    let (client, origin) = connect(&args.client)?;
    follow_with(args, &client).map_err(|e| origin.explain(e))
}

fn follow_with(args: &FollowArgs, client: &ApiClient) -> anyhow::Result<()> {
    let mut out = Printer::new(args.client.json);
    let opts = FollowOptions {
        after: args.after,
        ..FollowOptions::default()
    };
    let rt = runtime()?;
    let (outcome, last) = match rt.block_on(follow(client, &args.run_id, &opts, &mut out)) {
        Ok(done) => done,
        // `callbackd follow RUN | head`: the reader has all it wanted.
        Err(FollowError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("following run {}", args.run_id)),
    };
    let status = match outcome {
        Followed::Terminal(ev) => ev
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or("error")
            .to_string(),
        Followed::NothingMore | Followed::Expired(_) => {
            // Nothing more to stream: the run document says how it ended.
            if let Followed::Expired(e) = &outcome {
                out.note(&format!(
                    "the run's events were removed by retention ({e}); its state:"
                ));
            } else if last == 0 {
                out.note("the run has ended and has no events to show; its state:");
            }
            let run = rt.block_on(client.get(&format!("/v1/runs/{}", encode(&args.run_id))))?;
            out.summary(&run)?;
            run.get("status")
                .and_then(Value::as_str)
                .unwrap_or("unknown")
                .to_string()
        }
    };
    anyhow::ensure!(
        status == crate::run::RunStatus::Finished.as_str(),
        "run {} ended with status {status}",
        args.run_id
    );
    Ok(())
}

/// `callbackd sessions`: newest first.
pub fn sessions_command(args: &SessionsArgs) -> anyhow::Result<()> {
    let (client, origin) = connect(&args.client)?;
    sessions_with(args, &client).map_err(|e| origin.explain(e))
}

fn sessions_with(args: &SessionsArgs, client: &ApiClient) -> anyhow::Result<()> {
    let rt = runtime()?;
    let mut out = std::io::stdout().lock();
    let mut cursor = args.cursor.clone();
    let mut shown = 0usize;
    let mut header = true;
    loop {
        let mut path = format!("/v1/sessions?limit={}", args.limit);
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={}", encode(c)));
        }
        let page = rt.block_on(client.get(&path))?;
        let mut table = Table::new(&[
            "SESSION",
            "NAME",
            "STATUS",
            "MODEL",
            "LAST ACTIVITY",
            "WORKSPACE",
        ]);
        for s in page
            .get("sessions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if args.client.json {
                writeln!(out, "{s}")?;
            } else {
                table.push(session_row(s));
            }
            shown += 1;
        }
        // Only rows under a header, and only once the daemon answered: an error never sits
        // under an empty table.
        if !table.is_empty() {
            out.write_all(table.render(std::mem::take(&mut header)).as_bytes())?;
        }
        cursor = page
            .get("next_cursor")
            .and_then(Value::as_str)
            .map(str::to_string);
        match &cursor {
            Some(c) if !args.all => {
                out.flush()?;
                eprintln!("more sessions: callbackd sessions --cursor {c} (or --all)");
                break;
            }
            Some(_) => {}
            None => break,
        }
    }
    if shown == 0 && !args.client.json {
        eprintln!(
            "no sessions yet: create one in the console (/ui/), with POST /v1/sessions, or \
             let the bridge create one"
        );
    }
    Ok(())
}

/// A session as a row: a name cut to fit (a fork says so), the model it uses.
fn session_row(s: &Value) -> Vec<String> {
    let f = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or("");
    let cwd = match s.get("cwd") {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(","),
        Some(Value::String(c)) => c.clone(),
        _ => String::new(),
    };
    let mut name = table::cut(&render::one_line(f("name")), 32);
    if let Some(from) = s.get("forked_from").filter(|v| v.is_object()) {
        let how = from.get("at").and_then(Value::as_str).unwrap_or("");
        let run = from.get("run_id").and_then(Value::as_str).unwrap_or("");
        name = format!("{name} (fork {how} {})", table::cut(run, 12));
    }
    vec![
        f("session_id").to_string(),
        if name.is_empty() { "-".into() } else { name },
        f("status").to_string(),
        s.get("model")
            .and_then(Value::as_str)
            .unwrap_or("default")
            .to_string(),
        table::when(f("updated_at")),
        cwd,
    ]
}

/// `callbackd runs SESSION`: every run of the session, in turn order.
pub fn runs_command(args: &RunsArgs) -> anyhow::Result<()> {
    let (client, origin) = connect(&args.client)?;
    runs_with(args, &client).map_err(|e| origin.explain(e))
}

fn runs_with(args: &RunsArgs, client: &ApiClient) -> anyhow::Result<()> {
    let rt = runtime()?;
    let mut out = std::io::stdout().lock();
    let mut header = !args.client.json;
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/v1/sessions/{}/runs?limit=100", encode(&args.session_id));
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={}", encode(c)));
        }
        let page = rt.block_on(client.get(&path))?;
        let mut table = Table::new(&["RUN", "TURN", "STATUS", "STARTED", "EVENTS", "OUTPUT"]);
        for r in page
            .get("runs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if args.client.json {
                writeln!(out, "{r}")?;
                continue;
            }
            let f = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
            let started = if f("started_at").is_empty() {
                f("created_at")
            } else {
                f("started_at")
            };
            let what = match r.get("error").filter(|e| !e.is_null()) {
                Some(e) => format!(
                    "error: {}",
                    e.get("detail").and_then(Value::as_str).unwrap_or("")
                ),
                None => f("output").to_string(),
            };
            table.push(vec![
                f("run_id").to_string(),
                r.get("turn_number")
                    .and_then(Value::as_u64)
                    .unwrap_or(0)
                    .to_string(),
                f("status").to_string(),
                table::when(started),
                r.get("last_seq")
                    .and_then(Value::as_u64)
                    .unwrap_or(0)
                    .to_string(),
                table::cut(&render::one_line(&what), 80),
            ]);
        }
        if !table.is_empty() || (header && !args.client.json) {
            out.write_all(table.render(std::mem::take(&mut header)).as_bytes())?;
        }
        cursor = page
            .get("next_cursor")
            .and_then(Value::as_str)
            .map(str::to_string);
        if cursor.is_none() {
            break;
        }
    }
    Ok(())
}

/// `callbackd approvals [--all]`: the held tool calls (or every approval).
pub fn approvals_command(args: &ApprovalsArgs) -> anyhow::Result<()> {
    let (client, origin) = connect(&args.client)?;
    approvals_with(args, &client).map_err(|e| origin.explain(e))
}

fn approvals_with(args: &ApprovalsArgs, client: &ApiClient) -> anyhow::Result<()> {
    let rt = runtime()?;
    let path = if args.all {
        "/v1/approvals?state=all"
    } else {
        "/v1/approvals"
    };
    let list = rt.block_on(client.get(path))?;
    let mut out = std::io::stdout().lock();
    let items = list
        .get("approvals")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for a in &items {
        if args.client.json {
            writeln!(out, "{a}")?;
            continue;
        }
        let f = |k: &str| a.get(k).and_then(Value::as_str).unwrap_or("");
        let question = f("tool") == crate::tools::builtin::ask_user::NAME;
        // What the tool ran with: the edited arguments, when a person changed them; a
        // question shows its text and answer, never as edited arguments.
        let shown = if question {
            let answer = a
                .pointer("/approved_args/answer")
                .and_then(Value::as_str)
                .map(|t| format!(" -> {t:?}"))
                .unwrap_or_default();
            format!(
                "question {:?}{answer}",
                a.pointer("/args/question")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            )
        } else {
            match a.get("approved_args").filter(|v| !v.is_null()) {
                Some(ran) => format!(
                    "ran with {ran} (edited; the model asked {})",
                    a.get("args").cloned().unwrap_or(Value::Null)
                ),
                None => a.get("args").map(Value::to_string).unwrap_or_default(),
            }
        };
        let args_text: String = shown.chars().take(120).collect();
        let line = format!(
            "{:<22} {:<9} {:<16} run {:<40} expires {} {args_text}",
            f("id"),
            f("state"),
            if question { "question" } else { f("tool") },
            f("run_id"),
            f("expires_at").get(..19).unwrap_or(f("expires_at")),
        );
        writeln!(out, "{}", render::one_line(&line))?;
    }
    if items.is_empty() && !args.client.json {
        eprintln!(
            "{}",
            if args.all {
                "no approvals"
            } else {
                "no pending approvals"
            }
        );
    }
    Ok(())
}

/// `callbackd approve ID` / `callbackd deny ID [--reason ...]`.
pub fn decide_command(args: &DecideArgs, approve: bool) -> anyhow::Result<()> {
    let (client, origin) = connect(&args.client)?;
    decide_with(args, &client, approve).map_err(|e| origin.explain(e))
}

fn decide_with(args: &DecideArgs, client: &ApiClient, approve: bool) -> anyhow::Result<()> {
    let rt = runtime()?;
    let mut body = serde_json::json!({"decision": if approve { "approve" } else { "deny" }});
    if let Some(r) = &args.reason {
        body["reason"] = r.clone().into();
    }
    anyhow::ensure!(
        approve || (args.args.is_none() && !args.yes),
        "--args and --yes go with approve: a denial runs nothing"
    );
    if let Some(edited) = &args.args {
        let edited: Value = serde_json::from_str(edited)
            .map_err(|e| anyhow::anyhow!("--args is not JSON ({e}); give the tool's arguments as a JSON object, like --args '{{\"env\": \"staging\"}}'"))?;
        anyhow::ensure!(
            edited.is_object(),
            "--args must be a JSON object (the tool's arguments), not {edited}"
        );
        body["args"] = edited;
    }
    let path = format!("/v1/approvals/{}", encode(&args.approval_id));
    if approve && !args.yes {
        // A tool marked `confirm = true` is approved only when the person says so twice.
        let current = rt.block_on(client.get(&path))?;
        // The arguments to check are the ones the tool would run with: the edit, if any.
        let (to_check, note) = match body.get("args") {
            Some(edited) => (
                edited.clone(),
                format!(
                    "; the model asked {}",
                    current.get("args").cloned().unwrap_or(Value::Null)
                ),
            ),
            None => (
                current.get("args").cloned().unwrap_or(Value::Null),
                String::new(),
            ),
        };
        anyhow::ensure!(
            current.get("confirm").and_then(Value::as_bool) != Some(true),
            "tool {} is marked confirm = true: check the arguments it will run with ({to_check}{note}) \
             and approve again with --yes",
            current.get("tool").and_then(Value::as_str).unwrap_or("?"),
        );
    }
    let decided = rt.block_on(client.json(http::Method::POST, &path, Some(&body)))?;
    if args.client.json {
        println!("{decided}");
    } else {
        let line = format!(
            "approval {} {} by {}{}",
            args.approval_id,
            decided.get("state").and_then(Value::as_str).unwrap_or("?"),
            decided
                .get("decided_by")
                .and_then(Value::as_str)
                .unwrap_or("?"),
            match decided.get("approved_args").filter(|a| !a.is_null()) {
                Some(a) => format!(", with edited arguments {a}"),
                None => String::new(),
            }
        );
        println!("{}", render::one_line(&line));
    }
    Ok(())
}

/// `callbackd answer RUN_ID QUESTION_ID TEXT`: answers a run's open question (`ask_user`).
pub fn answer_command(args: &crate::cli::AnswerArgs) -> anyhow::Result<()> {
    let (client, origin) = connect(&args.client)?;
    answer_with(args, &client).map_err(|e| origin.explain(e))
}

fn answer_with(args: &crate::cli::AnswerArgs, client: &ApiClient) -> anyhow::Result<()> {
    let rt = runtime()?;
    let body = serde_json::json!({"question_id": args.question_id, "answer": args.text});
    let path = format!("/v1/runs/{}/resume", encode(&args.run_id));
    let answered = rt.block_on(client.json(http::Method::POST, &path, Some(&body)))?;
    if args.client.json {
        println!("{answered}");
    } else {
        let line = format!(
            "question {} of run {} answered by {}: {}",
            args.question_id,
            args.run_id,
            answered
                .get("decided_by")
                .and_then(Value::as_str)
                .unwrap_or("?"),
            args.text
        );
        println!("{}", render::one_line(&line));
    }
    Ok(())
}

pub(super) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Prints events to stdout (text or JSON lines) and notes to stderr.
struct Printer {
    json: bool,
    style: Style,
    out: std::io::Stdout,
}

impl Printer {
    fn new(json: bool) -> Printer {
        let out = std::io::stdout();
        let colour = !json && out.is_terminal() && std::env::var_os("NO_COLOR").is_none();
        Printer {
            json,
            style: Style { colour },
            out,
        }
    }

    /// A run document (`GET /v1/runs/{id}`), when there are no events to show.
    fn summary(&mut self, run: &Value) -> std::io::Result<()> {
        let mut out = self.out.lock();
        if self.json {
            writeln!(out, "{run}")?;
        } else {
            let f = |k: &str| run.get(k).and_then(Value::as_str).unwrap_or("");
            let line = format!("run {} status {}", f("run_id"), f("status"));
            writeln!(out, "{}", render::one_line(&line))?;
            for c in run
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let g = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("");
                let line = format!(
                    "  tool {} {} ({})",
                    g("tool"),
                    g("outcome"),
                    g("tool_call_id")
                );
                writeln!(out, "{}", render::one_line(&line))?;
            }
            if !f("output").is_empty() {
                writeln!(out, "  output: {}", render::one_line(f("output")))?;
            }
            if let Some(d) = run.pointer("/error/detail").and_then(Value::as_str) {
                writeln!(out, "  error: {}", render::one_line(d))?;
            }
        }
        out.flush()
    }
}

impl Sink for Printer {
    fn event(&mut self, event: &Value, _durable: bool) -> std::io::Result<()> {
        let mut out = self.out.lock();
        if self.json {
            writeln!(out, "{event}")?;
        } else if let Some(line) = render::line(event, self.style) {
            writeln!(out, "{line}")?;
        }
        out.flush()
    }

    fn note(&mut self, text: &str) {
        let text = render::one_line(text);
        crate::telemetry::stderr_line(format_args!("callbackd follow: {text}"));
    }
}
