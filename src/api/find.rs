//! Finding sessions and runs, and usage over time (issue 21): the filters of
//! `GET /v1/sessions` (`q`, `status`), the cross-session `GET /v1/runs` (`status`,
//! `session_id`, `since`, `until`, `q`) and `GET /v1/usage` (token totals and runs by
//! status, per UTC day or per session). The store pages them by keyset over indexed columns
//! ([`store::find`](crate::store::find)).
//!
//! A run's status here is its stored document's (what the lists show): the bridge updates
//! it 10-60 ms after it stores the terminal event, so a run that has just ended may still
//! count as `running` for that long.

use std::collections::{BTreeMap, HashMap};

use axum::extract::State;
use axum::response::Response;
use http::{StatusCode, Uri};
use serde::Serialize;
use serde_json::Value;

use super::problem::Problem;
use super::reader::Listed;
use super::{json_response, limit, query, ApiState, Caller};
use crate::clock::{now_ms, parse_time_ms, rfc3339_ms};
use crate::store::find::{CreatedCursor, RunQuery, SessionQuery};
use crate::store::AgentCursor;

/// The statuses a session's document has (cursor-sdk 1.1.0).
pub const SESSION_STATUSES: [&str; 4] = ["idle", "running", "error", "archived"];
/// The statuses of a run.
pub const RUN_STATUSES: [&str; 6] = crate::run::RunStatus::NAMES;

/// `?status=a,b`: the listed statuses, each one of `allowed`, or 400 saying which are.
fn statuses(v: Option<&String>, allowed: &[&str]) -> Result<Option<Vec<String>>, Problem> {
    let Some(v) = v.filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let list: Vec<String> = v.split(',').map(|s| s.trim().to_string()).collect();
    if let Some(bad) = list.iter().find(|s| !allowed.contains(&s.as_str())) {
        return Err(Problem::invalid(format!(
            "status {bad:?} is not one of {} (several: comma-separated)",
            allowed.join(", ")
        )));
    }
    Ok(Some(list))
}

/// `?since=` / `?until=`: an RFC 3339 time or a date (midnight UTC), as epoch ms.
fn time(name: &str, v: Option<&String>) -> Result<Option<i64>, Problem> {
    match v.filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => parse_time_ms(v).map(Some).ok_or_else(|| {
            Problem::invalid(format!(
                "{name} {v:?} is not a time: use RFC 3339 (2026-12-01T08:00:00Z) or a date \
                 (2026-12-01, midnight UTC)"
            ))
        }),
    }
}

fn text(v: Option<&String>) -> Option<String> {
    v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

fn bad_cursor() -> Problem {
    Problem::invalid("cursor is not a cursor this API returned")
}

fn listed(page: &str) -> Result<Listed, Problem> {
    let v: Value =
        serde_json::from_str(page).map_err(|e| Problem::internal(format!("a page: {e}")))?;
    Ok(Listed {
        items: v
            .get("items")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        next_cursor: v
            .get("nextCursor")
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty())
            .map(str::to_string),
    })
}

/// `GET /v1/sessions`: with `q` or `status`, the matching sessions, newest first; without,
/// the plain list (`sessions::list`).
pub async fn sessions(
    State(state): State<ApiState>,
    caller: Caller,
    uri: Uri,
) -> Result<Response, Problem> {
    let q = query(&uri)?;
    let status = statuses(q.get("status"), &SESSION_STATUSES)?;
    let text = text(q.get("q"));
    if status.is_none() && text.is_none() {
        return super::sessions::list(State(state), caller, uri).await;
    }
    let cursor = match q.get("cursor").filter(|c| !c.is_empty()) {
        Some(c) => Some(AgentCursor::decode(c).map_err(|_| bad_cursor())?),
        None => None,
    };
    let query = SessionQuery {
        q: text,
        status,
        limit: limit(q.get("limit").map(String::as_str), 50)?,
        cursor,
    };
    let page = listed(&state.records().find_sessions(&caller.ns, query).await?)?;
    super::sessions::session_page(&state, &caller.ns, page).await
}

/// The [`RunQuery`] of a `GET /v1/runs` query string.
fn run_query(q: &HashMap<String, String>, default_limit: usize) -> Result<RunQuery, Problem> {
    let since = time("since", q.get("since"))?;
    let until = time("until", q.get("until"))?;
    if let (Some(s), Some(u)) = (since, until) {
        if s >= u {
            return Err(Problem::invalid(format!(
                "since ({}) must be before until ({})",
                rfc3339_ms(s),
                rfc3339_ms(u)
            )));
        }
    }
    let cursor = match q.get("cursor").filter(|c| !c.is_empty()) {
        Some(c) => Some(CreatedCursor::decode(c).ok_or_else(bad_cursor)?),
        None => None,
    };
    Ok(RunQuery {
        session_id: text(q.get("session_id")),
        status: statuses(q.get("status"), &RUN_STATUSES)?,
        since_ms: since.map(|t| t as f64),
        until_ms: until.map(|t| t as f64),
        q: text(q.get("q")),
        limit: limit(q.get("limit").map(String::as_str), default_limit)?,
        cursor,
    })
}

/// `GET /v1/runs`: runs of every session, newest first, filtered.
pub async fn runs(
    State(state): State<ApiState>,
    caller: Caller,
    uri: Uri,
) -> Result<Response, Problem> {
    let q = query(&uri)?;
    let query = run_query(&q, 50)?;
    let page = listed(&state.records().find_runs(&caller.ns, query).await?)?;
    super::sessions::run_page(&state, &caller.ns, page).await
}

/// Token totals (the runs' `usage`; a run without usage adds nothing).
#[derive(Debug, Default, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

impl Tokens {
    fn add_usage(&mut self, usage: Option<&Value>) {
        let n = |k: &str| {
            usage
                .and_then(|u| u.get(k))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        self.input += n("inputTokens");
        self.output += n("outputTokens");
        self.cache_read += n("cacheReadTokens");
        self.cache_write += n("cacheWriteTokens");
    }
}

/// One group of `GET /v1/usage`: a UTC day or a session.
#[derive(Debug, Default, Clone, Serialize, schemars::JsonSchema)]
pub struct UsageGroup {
    /// The day (`2026-12-01`, UTC) or the session id.
    pub key: String,
    /// The session's name (`group_by=session`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub runs: u64,
    /// How many runs ended (or stand) in each status.
    pub runs_by_status: BTreeMap<String, u64>,
    pub tokens: Tokens,
}

/// `GET /v1/usage`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Usage {
    /// `day` or `session`.
    pub group_by: String,
    pub since: String,
    pub until: String,
    /// Days oldest first (days without runs are left out); sessions by most tokens.
    pub groups: Vec<UsageGroup>,
    pub total: UsageGroup,
}

/// The longest window `GET /v1/usage` sums over (and its default: the last 30 days).
const MAX_DAYS: i64 = 366;
const DAY_MS: i64 = 86_400_000;

/// `GET /v1/usage?group_by=day|session&since=&until=`: token totals and runs by status of
/// the runs created in `[since, until)`, per UTC day or per session. Reads the runs of the
/// window by the `runs_by_created` index, 1000 at a time.
pub async fn usage(
    State(state): State<ApiState>,
    caller: Caller,
    uri: Uri,
) -> Result<Response, Problem> {
    let q = query(&uri)?;
    let by_day = match q.get("group_by").map(String::as_str) {
        None | Some("") | Some("day") => true,
        Some("session") => false,
        Some(other) => {
            return Err(Problem::invalid(format!(
                "group_by {other:?} is not one of day, session"
            )))
        }
    };
    let mut query = run_query(&q, 1000)?;
    let until = query.until_ms.map_or_else(now_ms, |u| u as i64);
    let since = query.since_ms.map_or(until - 30 * DAY_MS, |s| s as i64);
    if until - since > MAX_DAYS * DAY_MS {
        return Err(Problem::invalid(format!(
            "the window from since to until is longer than {MAX_DAYS} days"
        )));
    }
    query.since_ms = Some(since as f64);
    query.until_ms = Some(until as f64);
    query.limit = 1000;
    query.cursor = None;
    let mut groups: BTreeMap<String, UsageGroup> = BTreeMap::new();
    let mut total = UsageGroup {
        key: "total".into(),
        ..UsageGroup::default()
    };
    loop {
        let page = listed(&state.records().find_runs(&caller.ns, query.clone()).await?)?;
        for doc in &page.items {
            let created = doc.get("createdAt").and_then(Value::as_f64).unwrap_or(0.0) as i64;
            let key = if by_day {
                rfc3339_ms(created)[..10].to_string()
            } else {
                doc.get("agentId")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            let status = doc
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or(crate::run::RunStatus::Queued.as_str())
                .to_string();
            for g in [
                groups.entry(key.clone()).or_insert_with(|| UsageGroup {
                    key,
                    ..UsageGroup::default()
                }),
                &mut total,
            ] {
                g.runs += 1;
                *g.runs_by_status.entry(status.clone()).or_default() += 1;
                g.tokens.add_usage(doc.get("usage"));
            }
        }
        match page.next_cursor {
            Some(c) => query.cursor = Some(CreatedCursor::decode(&c).ok_or_else(bad_cursor)?),
            None => break,
        }
    }
    let mut groups: Vec<UsageGroup> = groups.into_values().collect();
    if !by_day {
        let reader = state.reader(&caller.ns);
        for g in &mut groups {
            g.name = reader
                .agent(&g.key)
                .await?
                .and_then(|d| d.get("name").and_then(Value::as_str).map(str::to_string));
        }
        let sum = |t: &Tokens| t.input + t.output + t.cache_read + t.cache_write;
        groups.sort_by(|a, b| sum(&b.tokens).cmp(&sum(&a.tokens)).then(a.key.cmp(&b.key)));
    }
    Ok(json_response(
        StatusCode::OK,
        &Usage {
            group_by: if by_day { "day" } else { "session" }.into(),
            since: rfc3339_ms(since),
            until: rfc3339_ms(until),
            groups,
            total,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_filters_say_what_is_allowed() {
        let q = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        for (pairs, why) in [
            (
                q(&[("status", "done")]),
                "status \"done\" is not one of queued, running",
            ),
            (q(&[("status", "finished,Nope")]), "status \"Nope\""),
            (
                q(&[("since", "yesterday")]),
                "since \"yesterday\" is not a time",
            ),
            (
                q(&[("until", "2026-02-30")]),
                "until \"2026-02-30\" is not a time",
            ),
            (
                q(&[("since", "2026-12-02"), ("until", "2026-12-01")]),
                "must be before until",
            ),
            (q(&[("cursor", "abc")]), "cursor is not a cursor"),
            (q(&[("limit", "0")]), "limit must be"),
        ] {
            let p = run_query(&pairs, 50).unwrap_err();
            assert_eq!(p.status, 400);
            assert!(p.detail.contains(why), "{:?}: {}", pairs, p.detail);
        }
        let ok = run_query(
            &q(&[("status", "finished,error"), ("since", "2026-12-01")]),
            50,
        )
        .unwrap();
        assert_eq!(ok.status, Some(vec!["finished".into(), "error".into()]));
        assert_eq!(ok.since_ms, Some(1_796_083_200_000.0));
    }

    #[test]
    fn tokens_add_the_runs_usage() {
        let mut t = Tokens::default();
        t.add_usage(Some(
            &serde_json::json!({"inputTokens": 10, "outputTokens": 3, "cacheReadTokens": 2}),
        ));
        t.add_usage(Some(
            &serde_json::json!({"inputTokens": 1, "cacheWriteTokens": 4}),
        ));
        t.add_usage(None);
        assert_eq!(
            t,
            Tokens {
                input: 11,
                output: 3,
                cache_read: 2,
                cache_write: 4
            }
        );
    }
}
