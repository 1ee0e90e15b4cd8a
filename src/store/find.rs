//! Finding sessions and runs for people (issue 21): `GET /v1/sessions?q=&status=` and
//! `GET /v1/runs?status=&session_id=&since=&until=&q=`. The queries read the columns
//! migration 0008 copies out of the documents, and page by a keyset so a page costs the same
//! however deep it is ([`sql::find`](super::sql::find)).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

/// `GET /v1/sessions` filters. Sessions come newest first (`updatedAt` desc, as
/// `agents.list`), so the page cursor is an [`AgentCursor`](super::AgentCursor).
#[derive(Debug, Clone, Default)]
pub struct SessionQuery {
    /// A case-insensitive substring of the session's name or id.
    pub q: Option<String>,
    /// Any of these statuses (`idle`, `archived`, ...).
    pub status: Option<Vec<String>>,
    pub limit: usize,
    pub cursor: Option<super::AgentCursor>,
}

/// `GET /v1/runs` filters. Runs come newest first (`createdAt` desc, then `runId` desc).
#[derive(Debug, Clone, Default)]
pub struct RunQuery {
    pub session_id: Option<String>,
    /// Any of these document statuses (`running`, `finished`, `error`, ...).
    pub status: Option<Vec<String>>,
    /// `createdAt >= since` (epoch ms).
    pub since_ms: Option<f64>,
    /// `createdAt < until` (epoch ms).
    pub until_ms: Option<f64>,
    /// A case-insensitive substring of the run's input, its output or its session's name.
    pub q: Option<String>,
    pub limit: usize,
    pub cursor: Option<CreatedCursor>,
}

/// Position after the last run of a `GET /v1/runs` page: base64url of `created_at ms` and
/// the run id (`<ms>:<run_id>`).
#[derive(Debug, Clone, PartialEq)]
pub struct CreatedCursor {
    pub created_at: f64,
    pub run_id: String,
}

impl CreatedCursor {
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(format!("{}:{}", self.created_at, self.run_id))
    }

    /// `None` for anything [`encode`](Self::encode) did not produce.
    pub fn decode(s: &str) -> Option<Self> {
        let bytes = URL_SAFE_NO_PAD.decode(s).ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let (n, id) = text.split_once(':')?;
        let created_at: f64 = n.parse().ok()?;
        (created_at.is_finite() && !id.is_empty()).then(|| CreatedCursor {
            created_at,
            run_id: id.to_string(),
        })
    }
}

/// `q` as a `LIKE` pattern matching it anywhere, lower-cased, with `\` escaping `%`, `_`
/// and itself (the statements say `ESCAPE '\'`).
pub fn like_pattern(q: &str) -> String {
    let mut out = String::with_capacity(q.len() + 2);
    out.push('%');
    for c in q.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips_and_garbage_is_refused() {
        let c = CreatedCursor {
            created_at: 1_764_633_600_123.0,
            run_id: "run-a:b".into(),
        };
        assert_eq!(CreatedCursor::decode(&c.encode()), Some(c));
        for bad in ["", "!!", "bm9jb2xvbg", &URL_SAFE_NO_PAD.encode("x:run")] {
            assert_eq!(CreatedCursor::decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn like_patterns_match_the_text_literally() {
        assert_eq!(like_pattern("50%_a\\B"), "%50\\%\\_a\\\\b%");
    }
}
