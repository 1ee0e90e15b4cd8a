//! The bridge's built-in JSONL store layout (`--local-store '{"type":"jsonl","rootDir":D}'`,
//! `JsonlLocalAgentStore` of `@cursor/sdk` 1.1.0), as read from its code and from a real run:
//!
//! - `D/agents.ndjson`: one agent document per line, as the bridge wrote it.
//! - `D/runs.ndjson`: one run document per line.
//! - `D/run_events.ndjson`: `{"runId","seq","offset","eventType","payload","payloadRef",
//!   "idempotencyKey","createdAt"}` per line, `offset` = `String(seq)`, `createdAt` an ISO
//!   8601 UTC string (`toISOString()`), where callbackd keeps epoch milliseconds.
//! - `D/checkpoints.ndjson`: `{"agentId","blobId","dataBase64"}` per line.
//!
//! A missing file reads as empty. Each file is rewritten whole on every change (write to a
//! temporary name, fsync, rename), and every line is `JSON.stringify` output, so one line is
//! one record. The bridge rejects a file whose line fails its shape checks ("Corrupt local
//! agent store"), except a last line, which it skips as a torn write; [`check_agent`] and the
//! others below are those checks, so that an export never writes what the bridge would
//! reject and an import never takes it either.

use serde_json::{Map, Value};

pub const AGENTS: &str = "agents.ndjson";
pub const RUNS: &str = "runs.ndjson";
pub const RUN_EVENTS: &str = "run_events.ndjson";
pub const CHECKPOINTS: &str = "checkpoints.ndjson";
/// The four files, in the order an import reads them.
pub const FILES: [&str; 4] = [AGENTS, RUNS, RUN_EVENTS, CHECKPOINTS];

const AGENT_STATUSES: [&str; 4] = ["idle", "running", "error", "archived"];
const RUN_STATUSES: [&str; 6] = crate::run::RunStatus::NAMES;

fn object<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("{what} is not a JSON object"))
}

fn string(o: &Map<String, Value>, key: &str) -> Result<(), String> {
    match o.get(key) {
        Some(Value::String(_)) => Ok(()),
        Some(_) => Err(format!("{key} must be a string")),
        None => Err(format!("{key} is missing")),
    }
}

fn number(o: &Map<String, Value>, key: &str) -> Result<(), String> {
    match o.get(key) {
        Some(Value::Number(_)) => Ok(()),
        Some(_) => Err(format!("{key} must be a number")),
        None => Err(format!("{key} is missing")),
    }
}

fn null_or_string(o: &Map<String, Value>, key: &str) -> Result<(), String> {
    match o.get(key) {
        Some(Value::String(_) | Value::Null) => Ok(()),
        Some(_) => Err(format!("{key} must be a string or null")),
        None => Err(format!("{key} is missing")),
    }
}

fn one_of(o: &Map<String, Value>, key: &str, allowed: &[&str]) -> Result<(), String> {
    match o.get(key).and_then(Value::as_str) {
        Some(s) if allowed.contains(&s) => Ok(()),
        Some(s) => Err(format!("{key} {s:?} is not one of {}", allowed.join(", "))),
        None => Err(format!("{key} must be one of {}", allowed.join(", "))),
    }
}

/// The bridge's check of an `agents.ndjson` record.
pub fn check_agent(v: &Value) -> Result<(), String> {
    let o = object(v, "the agent")?;
    string(o, "agentId")?;
    string(o, "cwd")?;
    one_of(o, "status", &AGENT_STATUSES)?;
    number(o, "createdAt")?;
    number(o, "updatedAt")
}

/// The bridge's check of a `runs.ndjson` record.
pub fn check_run(v: &Value) -> Result<(), String> {
    let o = object(v, "the run")?;
    string(o, "runId")?;
    string(o, "agentId")?;
    number(o, "turnNumber")?;
    one_of(o, "status", &RUN_STATUSES)?;
    number(o, "createdAt")?;
    number(o, "updatedAt")
}

/// The bridge's check of a `run_events.ndjson` record.
pub fn check_event(v: &Value) -> Result<(), String> {
    let o = object(v, "the event")?;
    string(o, "runId")?;
    number(o, "seq")?;
    string(o, "offset")?;
    string(o, "eventType")?;
    string(o, "createdAt")?;
    null_or_string(o, "payloadRef")?;
    null_or_string(o, "idempotencyKey")
}

/// The bridge's check of a `checkpoints.ndjson` record.
pub fn check_checkpoint(v: &Value) -> Result<(), String> {
    let o = object(v, "the checkpoint")?;
    string(o, "agentId")?;
    string(o, "blobId")?;
    string(o, "dataBase64")
}

/// `json` on one line: whitespace outside strings removed, every token kept byte for byte
/// (a document callbackd stores verbatim may have been sent pretty-printed, and a newline in
/// it would split the record). Raw newlines cannot occur inside JSON strings.
pub fn one_line(json: &str) -> std::borrow::Cow<'_, str> {
    if !json
        .bytes()
        .any(|b| matches!(b, b'\n' | b'\r' | b'\t' | b' '))
    {
        return json.into();
    }
    let mut out = String::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in json.chars() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !matches!(c, ' ' | '\n' | '\r' | '\t') {
            out.push(c);
        }
    }
    out.into()
}

/// Epoch milliseconds as `toISOString()` writes them: `2026-12-01T08:49:23.123Z`.
pub fn iso_from_ms(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

/// Epoch milliseconds of an RFC 3339 time (`YYYY-MM-DDTHH:MM:SS[.fff]` then `Z` or
/// `±HH:MM`), what `toISOString()` and most writers produce; `None` for anything else.
pub fn ms_from_iso(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())
            .flatten()
    };
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut ms = 0;
    if b[i] == b'.' {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
        let frac = &s[start..i.min(start + 3)];
        ms = frac.parse::<i64>().ok()? * 10_i64.pow(3 - frac.len() as u32);
    }
    let offset_min = match &s[i..] {
        "Z" | "z" => 0,
        tz if tz.len() == 6 && matches!(&tz[..1], "+" | "-") && &tz[3..4] == ":" => {
            let (oh, om) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
            let sign = if &tz[..1] == "-" { -1 } else { 1 };
            sign * (oh * 60 + om)
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo, d);
    Some(((days * 24 + h) * 60 + mi - offset_min) * 60_000 + sec * 1000 + ms)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the era-based method: 400-year eras
/// of 146,097 days, years starting in March so that the leap day comes last).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_times_round_trip_as_to_iso_string_writes_them() {
        for (ms, iso) in [
            (0, "1970-01-01T00:00:00.000Z"),
            (951_782_400_000, "2000-02-29T00:00:00.000Z"),
            (1_780_000_000_123, "2026-05-28T20:26:40.123Z"),
            (-1, "1969-12-31T23:59:59.999Z"),
            (4_102_444_799_999, "2099-12-31T23:59:59.999Z"),
        ] {
            assert_eq!(iso_from_ms(ms), iso);
            assert_eq!(ms_from_iso(iso), Some(ms), "{iso}");
        }
        assert_eq!(
            ms_from_iso("2026-05-28T22:26:40.1+02:00"),
            Some(1_780_000_000_100)
        );
        assert_eq!(ms_from_iso("2026-05-28T20:26:40Z"), Some(1_780_000_000_000));
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-05-28T20:26:40",
            "2026-05-28T20:26:40.Z",
        ] {
            assert_eq!(ms_from_iso(bad), None, "{bad}");
        }
    }

    #[test]
    fn one_line_drops_whitespace_outside_strings_only() {
        assert_eq!(one_line(r#"{"a":1}"#), r#"{"a":1}"#);
        assert_eq!(
            one_line("{\n  \"a b\": [1, 2.50],\n  \"c\": \"x \\\" y\\\\\" }"),
            r#"{"a b":[1,2.50],"c":"x \" y\\"}"#
        );
    }

    #[test]
    fn the_bridges_checks_name_what_is_wrong() {
        let agent = serde_json::json!({"agentId":"a","cwd":"/w","status":"idle","createdAt":1,"updatedAt":2});
        assert!(check_agent(&agent).is_ok());
        let mut bad = agent.clone();
        bad["status"] = "sleeping".into();
        assert!(check_agent(&bad)
            .unwrap_err()
            .contains("status \"sleeping\""));
        bad = agent.clone();
        bad["createdAt"] = "1".into();
        assert_eq!(check_agent(&bad).unwrap_err(), "createdAt must be a number");
        assert!(check_event(&serde_json::json!({"runId":"r","seq":1,"offset":"1","eventType":"e","createdAt":"x","payloadRef":null})).unwrap_err().contains("idempotencyKey"));
        assert!(check_checkpoint(&serde_json::json!([])).is_err());
    }
}
