//! Pages: [`write_page`] from the rows of a `LIMIT limit + 1` query, and [`Keyset`], the
//! catalogs paged by a `(number, id)` key.

use super::{Conditions, Dialect, Exec, Row, Value};
use crate::store::json::json_str;
use crate::store::page::PageWriter;
use crate::store::StoreError;

/// `LIMIT limit + 1` (the row beyond the page tells that more remain): a literal on SQLite,
/// a parameter (the next of `params`) on PostgreSQL, where the statement's text then does
/// not depend on the limit.
pub fn limit_clause(d: Dialect, limit: usize, params: &mut Vec<Value<'_>>) -> String {
    let n = limit.saturating_add(1);
    match d {
        Dialect::Sqlite => format!("LIMIT {n}"),
        Dialect::Postgres => {
            params.push(Value::Int(i64::try_from(n).unwrap_or(i64::MAX)));
            format!("LIMIT ${}", params.len())
        }
    }
}

/// Writes a page ([`PageWriter`]) from rows selected with `LIMIT limit + 1`; the row
/// beyond the page, when there is one, adds `"<next_key>": encode(key of the last item)`.
#[allow(clippy::too_many_arguments)]
pub async fn write_page<X: Exec, K: Send>(
    x: &X,
    sql: &str,
    params: &[Value<'_>],
    limit: usize,
    next_key: &str,
    item: impl Fn(&dyn Row, &mut String) -> Result<(), StoreError> + Sync,
    key: impl Fn(&dyn Row) -> Result<K, StoreError> + Sync,
    encode: impl Fn(&K) -> String,
) -> Result<String, X::Error> {
    let mut page = PageWriter::new(limit);
    let mut last: Option<K> = None;
    let mut more = false;
    x.each_row(sql, params, &mut |row| {
        if page.is_full() {
            more = true;
            return Ok(());
        }
        page.push(|out| item(row, out))?;
        last = Some(key(row)?);
        Ok(())
    })
    .await?;
    Ok(match &last {
        Some(last) if more => page.finish_with_next(next_key, &encode(last)),
        _ => page.finish(),
    })
}

/// A catalog paged by a `(number, id)` key: agents by `(updated_at, agent_id)` descending,
/// runs by `(turn_number, run_id)` ascending. Pages continue strictly after the last item's
/// key, so ties on the number never skip or repeat an item across a page boundary.
pub struct Keyset {
    pub table: &'static str,
    pub number: &'static str,
    pub id: &'static str,
    pub descending: bool,
}

impl Keyset {
    /// One page of the `doc` column of the rows matching `c`, after the key `after`;
    /// `nextCursor` is `cursor(number, id)` of the last item, while more items remain.
    pub async fn page<X: Exec>(
        &self,
        x: &X,
        mut c: Conditions<'_>,
        after: Option<(f64, &str)>,
        limit: usize,
        cursor: impl Fn(f64, String) -> String,
    ) -> Result<String, X::Error> {
        let Keyset {
            table, number, id, ..
        } = self;
        let (cmp, dir) = if self.descending {
            ("<", "DESC")
        } else {
            (">", "ASC")
        };
        if let Some((n, last_id)) = after {
            // A row value, not `number < ? OR (number = ? AND id < ?)`: SQLite turns the
            // row value into a range of the (.., number, id) index, but scans the whole
            // filtered prefix for the OR (measured: 10,000 agents, 724 -> 48 us a page).
            c.raw(
                |d, p| {
                    let (a, b) = (d.typed(p, "float8"), d.typed(p + 1, "text"));
                    format!("({number}, {id}) {cmp} ({a}, {b})")
                },
                [Value::Float(n), Value::Text(last_id)],
            );
        }
        let cond = c.sql();
        let mut params = c.into_params();
        let limit_sql = limit_clause(X::DIALECT, limit, &mut params);
        let sql = format!(
            "SELECT {id}, {number}, doc FROM {table} WHERE {cond} ORDER BY {number} {dir}, {id} {dir} {limit_sql}"
        );
        write_page(
            x,
            &sql,
            &params,
            limit,
            "nextCursor",
            |row, out| {
                out.push_str(row.text(2)?);
                Ok(())
            },
            |row| Ok((row.float(1)?, row.text(0)?.to_string())),
            |(n, last_id)| json_str(&cursor(*n, last_id.clone())),
        )
        .await
    }
}
