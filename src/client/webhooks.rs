//! `callbackd webhooks`: the namespace's recent webhook deliveries
//! (`GET /v1/webhooks/deliveries`), one line each, newest first: when, the event, where, its
//! state, how many attempts, and the last answer or error (with when the next attempt is due
//! while it is pending).

use std::io::Write;

use serde_json::Value;

use super::commands::runtime;
use super::discover::connect;
use super::follow::encode;
use super::http::ApiClient;
use crate::cli::WebhooksArgs;

pub fn webhooks_command(args: &WebhooksArgs) -> anyhow::Result<()> {
    let (client, origin) = connect(&args.client)?;
    webhooks_with(args, &client).map_err(|e| origin.explain(e))
}

fn webhooks_with(args: &WebhooksArgs, client: &ApiClient) -> anyhow::Result<()> {
    let rt = runtime()?;
    let mut path = format!("/v1/webhooks/deliveries?limit={}", args.limit);
    if let Some(state) = &args.state {
        path.push_str(&format!("&state={}", encode(state)));
    }
    let list = rt.block_on(client.get(&path))?;
    let items = list
        .get("deliveries")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut out = std::io::stdout().lock();
    if !args.client.json && !items.is_empty() {
        writeln!(
            out,
            "{:<19} {:<18} {:<9} {:>8}  {:<36} LAST",
            "CREATED", "TYPE", "STATE", "ATTEMPTS", "URL"
        )?;
    }
    for d in &items {
        if args.client.json {
            writeln!(out, "{d}")?;
            continue;
        }
        writeln!(out, "{}", line(d))?;
    }
    if items.is_empty() && !args.client.json {
        eprintln!("no webhook deliveries");
    }
    Ok(())
}

/// One delivery as a line of the table.
fn line(d: &Value) -> String {
    let f = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("");
    let created = f("created_at");
    let last = match (
        d.get("last_status").and_then(Value::as_i64),
        f("last_error"),
    ) {
        (_, e) if !e.is_empty() => e.to_string(),
        (Some(status), _) => status.to_string(),
        (None, _) => "-".into(),
    };
    let next = match f("next_attempt_at") {
        "" => String::new(),
        at => format!(" (next {})", at.get(..19).unwrap_or(at)),
    };
    // The last error can be a receiver's own words (its response): escaped for the terminal.
    super::render::one_line(&format!(
        "{:<19} {:<18} {:<9} {:>8}  {:<36} {last}{next}",
        created.get(..19).unwrap_or(created),
        f("type"),
        f("state"),
        d.get("attempts").and_then(Value::as_i64).unwrap_or(0),
        f("url"),
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn a_line_says_the_last_error_and_when_the_next_attempt_is() {
        let d = json!({"created_at": "2026-12-06T07:00:00.000Z", "type": "run.ended",
            "state": "pending", "attempts": 2, "url": "http://h/hook", "last_status": 500,
            "last_error": "the receiver answered 500", "next_attempt_at": "2026-12-06T07:05:00.000Z"});
        let line = super::line(&d);
        assert!(line.starts_with("2026-12-06T07:00:00 run.ended"), "{line}");
        assert!(line.contains("pending") && line.contains(" 2 "), "{line}");
        assert!(
            line.ends_with("the receiver answered 500 (next 2026-12-06T07:05:00)"),
            "{line}"
        );
        // A receiver's answer is its own text: it never reaches the terminal raw.
        let hostile = json!({"type": "run.ended", "state": "failed", "attempts": 3,
            "last_error": "the receiver answered 500: \u{1b}]0;pwned\u{7}\nok"});
        let line = super::line(&hostile);
        assert!(!line.chars().any(char::is_control), "{line:?}");
        let ok =
            json!({"type": "run.ended", "state": "delivered", "attempts": 1, "last_status": 200});
        assert!(super::line(&ok).ends_with(" 200"), "{}", super::line(&ok));
    }
}
