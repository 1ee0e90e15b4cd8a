//! The statements of [`store::find`](crate::store::find): sessions and runs by filter, newest
//! first, paged by keyset over the indexes of migration 0008 (`agents_by_recency`,
//! `runs_by_created`, `runs_by_agent_created`). `q` is a substring test (`LIKE`), so it
//! reads every row the other filters leave; status, session and time are index ranges or
//! tests on the rows of the range.

use super::{Conditions, Dialect, Exec, Keyset, Value};
use crate::store::find::{like_pattern, CreatedCursor, RunQuery, SessionQuery};
use crate::store::AgentCursor;

/// `lower(column) LIKE <param n> ESCAPE '\'`.
fn like(d: Dialect, column: &str, n: usize) -> String {
    format!(
        "lower(coalesce({column}, '')) LIKE {} ESCAPE '\\'",
        d.typed(n, "text")
    )
}

/// A page of agent documents (`{"items": [...], "nextCursor": ...}`).
pub async fn sessions<X: Exec>(x: &X, ns: &str, q: &SessionQuery) -> Result<String, X::Error> {
    let pattern = q.q.as_deref().map(like_pattern);
    let mut c = Conditions::new(X::DIALECT, ns);
    c.in_list("status", q.status.as_deref());
    if let Some(p) = &pattern {
        c.raw(
            |d, n| format!("({} OR {})", like(d, "name", n), like(d, "agent_id", n)),
            [Value::Text(p)],
        );
    }
    const ORDER: Keyset = Keyset {
        table: "agents",
        number: "updated_at",
        id: "agent_id",
        descending: true,
    };
    let after = q
        .cursor
        .as_ref()
        .map(|k| (k.updated_at, k.agent_id.as_str()));
    ORDER
        .page(x, c, after, q.limit, |updated_at, agent_id| {
            AgentCursor {
                updated_at,
                agent_id,
            }
            .encode()
        })
        .await
}

/// A page of run documents, newest first.
pub async fn runs<X: Exec>(x: &X, ns: &str, q: &RunQuery) -> Result<String, X::Error> {
    let pattern = q.q.as_deref().map(like_pattern);
    let mut c = Conditions::new(X::DIALECT, ns);
    if let Some(id) = &q.session_id {
        c.eq("agent_id", id);
    }
    c.in_list("status", q.status.as_deref());
    if let Some(since) = q.since_ms {
        c.raw(
            |d, n| format!("created_at >= {}", d.typed(n, "float8")),
            [Value::Float(since)],
        );
    }
    if let Some(until) = q.until_ms {
        c.raw(
            |d, n| format!("created_at < {}", d.typed(n, "float8")),
            [Value::Float(until)],
        );
    }
    if let Some(p) = &pattern {
        c.raw(
            |d, n| {
                format!(
                    "({} OR EXISTS (SELECT 1 FROM run_inputs i WHERE i.ns = runs.ns AND \
                     i.run_id = runs.run_id AND {}) OR EXISTS (SELECT 1 FROM agents a WHERE \
                     a.ns = runs.ns AND a.agent_id = runs.agent_id AND {}))",
                    like(d, "result", n),
                    like(d, "i.text", n),
                    like(d, "a.name", n)
                )
            },
            [Value::Text(p)],
        );
    }
    const ORDER: Keyset = Keyset {
        table: "runs",
        number: "created_at",
        id: "run_id",
        descending: true,
    };
    let after = q.cursor.as_ref().map(|k| (k.created_at, k.run_id.as_str()));
    ORDER
        .page(x, c, after, q.limit, |created_at, run_id| {
            CreatedCursor { created_at, run_id }.encode()
        })
        .await
}
