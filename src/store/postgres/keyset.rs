//! Pages of a catalog keyed by `(number, id)`: agents by `(updated_at, agent_id)`
//! descending, runs by `(turn_number, run_id)` ascending, exactly as the SQLite backend
//! pages them (a row value comparison continues strictly after the last item's key).

use tokio_postgres::types::Type;
use tokio_postgres::Row;

use super::db::{Conditions, Db, Value};
use super::error::Fail;
use crate::store::json::json_str;
use crate::store::page::PageWriter;

pub struct Keyset {
    pub table: &'static str,
    pub number: &'static str,
    pub id: &'static str,
    pub descending: bool,
}

impl Keyset {
    /// One page of the `doc` column of the rows matching `c`, after the key `after`;
    /// `nextCursor` is `cursor(number, id)` of the last item, while more items remain.
    pub async fn page(
        &self,
        db: &Db<'_>,
        mut c: Conditions,
        after: Option<(f64, &str)>,
        limit: usize,
        cursor: impl Fn(f64, String) -> String,
    ) -> Result<String, Fail> {
        let Keyset {
            table, number, id, ..
        } = self;
        let (cmp, dir) = if self.descending {
            ("<", "DESC")
        } else {
            (">", "ASC")
        };
        if let Some((n, last_id)) = after {
            c.raw(
                &format!("({number}, {id}) {cmp} ({{}}::float8, {{}}::text)"),
                vec![Value::Float(n), Value::Text(last_id.to_string())],
            );
        }
        let sql = format!(
            "SELECT {id}, {number}, doc FROM {table} WHERE {} ORDER BY {number} {dir}, {id} {dir} LIMIT ${}",
            c.sql(),
            c.next_param()
        );
        let lim = limit_param(limit);
        let mut params = c.params();
        params.push((&lim, Type::INT8));
        let rows = db.query(&sql, &params).await?;
        Ok(write_page(
            &rows,
            limit,
            "nextCursor",
            |row, out| out.push_str(row.get::<_, &str>(2)),
            |row| json_str(&cursor(row.get(1), row.get::<_, String>(0))),
        ))
    }
}

/// `LIMIT limit + 1`: the row beyond the page tells that more remain.
pub fn limit_param(limit: usize) -> i64 {
    i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX)
}

/// A page from rows selected with `LIMIT limit + 1`; `next` gives the cursor (JSON) of a
/// row, asked only of the last item when a row beyond it exists.
pub fn write_page(
    rows: &[Row],
    limit: usize,
    next_key: &str,
    item: impl Fn(&Row, &mut String),
    next: impl Fn(&Row) -> String,
) -> String {
    let mut page = PageWriter::new(limit);
    let mut last: Option<&Row> = None;
    for row in rows {
        if page.is_full() {
            if let Some(last) = last {
                return page.finish_with_next(next_key, &next(last));
            }
            break;
        }
        let _ = page.push(|out| {
            item(row, out);
            Ok::<_, ()>(())
        });
        last = Some(row);
    }
    page.finish()
}
