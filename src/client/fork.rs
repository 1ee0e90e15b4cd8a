//! `callbackd fork RUN_ID [--before] [--name NAME]`: `POST /v1/sessions/{session_id}/fork`
//! for a run named by its id alone. The fork route is under the run's session (a run id is
//! what a person has in hand: `callbackd runs`, the console, a stream), so the session is read
//! from the run first.

use serde_json::{json, Value};

use super::commands::runtime;
use super::discover::connect;
use super::follow::encode;
use super::http::ApiClient;
use crate::cli::ForkArgs;

pub fn fork_command(args: &ForkArgs) -> anyhow::Result<()> {
    let (client, origin) = connect(&args.client)?;
    fork_with(args, &client).map_err(|e| origin.explain(e))
}

fn fork_with(args: &ForkArgs, client: &ApiClient) -> anyhow::Result<()> {
    let rt = runtime()?;
    let run = rt.block_on(client.get(&format!("/v1/runs/{}", encode(&args.run_id))))?;
    let session = run
        .get("session_id")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow::anyhow!("run {} names no session", args.run_id))?;
    let at = if args.before { "before" } else { "after" };
    let mut body = json!({"run_id": args.run_id, "at": at});
    if let Some(name) = &args.name {
        body["name"] = json!(name);
    }
    let path = format!("/v1/sessions/{}/fork", encode(session));
    let forked = rt.block_on(client.json(http::Method::POST, &path, Some(&body)))?;
    if args.client.json {
        println!("{forked}");
        return Ok(());
    }
    let id = forked
        .pointer("/session/session_id")
        .and_then(Value::as_str)
        .unwrap_or("?");
    println!("{}", super::render::one_line(id));
    crate::telemetry::stderr_line(format_args!(
        "callbackd fork: session {id} is session {session} {at} run {} ({} checkpoint blobs \
         copied); send it a message with POST /v1/sessions/{id}/messages",
        args.run_id,
        forked
            .get("blobs_copied")
            .and_then(Value::as_u64)
            .unwrap_or(0),
    ));
    Ok(())
}
