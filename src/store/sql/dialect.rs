//! [`Dialect`]: what differs between the SQL of SQLite and of PostgreSQL.

/// The SQL dialect of a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// The placeholder of parameter `n` (from 1): `?n` or `$n`.
    pub fn param(self, n: usize) -> String {
        match self {
            Dialect::Sqlite => format!("?{n}"),
            Dialect::Postgres => format!("${n}"),
        }
    }

    /// `column` is one of the strings of list parameter `n` ([`Value::TextList`](super::Value)):
    /// a JSON array expanded by `json_each` on SQLite, a `text[]` on PostgreSQL (one
    /// parameter either way, so the statement's text does not depend on the list's length
    /// and stays one cached prepared statement).
    pub fn in_list(self, column: &str, n: usize) -> String {
        match self {
            Dialect::Sqlite => format!("{column} IN (SELECT value FROM json_each(?{n}))"),
            Dialect::Postgres => format!("{column} = ANY(${n})"),
        }
    }

    /// List parameter `n` as rows, a `FROM` item `j` with the column `value`: for a query
    /// that looks each listed id up on its own (an index lookup each), where `IN` would
    /// scan every row of every listed id.
    pub fn list_rows(self, n: usize) -> String {
        match self {
            Dialect::Sqlite => format!("json_each(?{n}) AS j"),
            Dialect::Postgres => format!("unnest(${n}::text[]) AS j(value)"),
        }
    }

    /// Parameter `n` with the type PostgreSQL cannot infer where it stands (`float8`,
    /// `text`); SQLite needs none.
    pub fn typed(self, n: usize, pg_type: &str) -> String {
        match self {
            Dialect::Sqlite => format!("?{n}"),
            Dialect::Postgres => format!("${n}::{pg_type}"),
        }
    }

    /// Appended to a `SELECT` whose rows the transaction goes on to delete: PostgreSQL locks
    /// them (several daemons may write); SQLite's one writer needs no lock.
    pub fn for_update(self) -> &'static str {
        match self {
            Dialect::Sqlite => "",
            Dialect::Postgres => " FOR UPDATE",
        }
    }

    /// Appended to a `SELECT` of rows a daemon is about to claim: on PostgreSQL rows another
    /// daemon is claiming are skipped rather than waited for (each takes its own); SQLite's
    /// one writer needs no lock.
    pub fn skip_locked(self) -> &'static str {
        match self {
            Dialect::Sqlite => "",
            Dialect::Postgres => " FOR UPDATE SKIP LOCKED",
        }
    }

    /// Field `field` of the JSON document in text column `doc`, as text (NULL when absent).
    pub fn doc_text(self, doc: &str, field: &str) -> String {
        match self {
            Dialect::Sqlite => format!("json_extract({doc}, '$.{field}')"),
            Dialect::Postgres => format!("({doc}::json ->> '{field}')"),
        }
    }

    /// Field `field` of the JSON document in `doc` as a number, NULL when it is not one (on
    /// SQLite a non-number compared with a number never matches either).
    pub fn doc_number(self, doc: &str, field: &str) -> String {
        match self {
            Dialect::Sqlite => format!("json_extract({doc}, '$.{field}')"),
            Dialect::Postgres => format!(
                "CASE WHEN json_typeof({doc}::json -> '{field}') = 'number' \
                 THEN ({doc}::json ->> '{field}')::float8 END"
            ),
        }
    }

    /// The size in bytes of text column `column`, read from the row's header where the
    /// engine can: SQLite's `octet_length` (3.43+; the bundled one is newer) does not load the
    /// value, where `length(CAST(x AS BLOB))` copied every payload (and read its overflow
    /// pages) to measure it; PostgreSQL's takes a TOASTed value's size from its pointer.
    pub fn byte_length(self, column: &str) -> String {
        match self {
            Dialect::Sqlite => format!("octet_length({column})"),
            Dialect::Postgres => format!("octet_length({column})"),
        }
    }

    /// `SUM(expr)` as an integer, 0 over no rows (PostgreSQL's `SUM` of integers is
    /// `numeric`: cast back).
    pub fn sum_int(self, expr: &str) -> String {
        match self {
            Dialect::Sqlite => format!("coalesce(sum({expr}), 0)"),
            Dialect::Postgres => format!("coalesce(sum({expr}), 0)::int8"),
        }
    }

    /// The tables keyed by `(ns, run_id)` that go with a run's events. On PostgreSQL the
    /// run's seq counter (`run_seqs`) first: deleting its row waits for any append of that
    /// run still in flight (it holds the row), and the event delete that follows, a new
    /// statement with a new snapshot, then also removes that append's event. SQLite numbers
    /// events by `max(seq) + 1` and has no counter.
    pub fn event_tables(self) -> &'static [&'static str] {
        match self {
            Dialect::Sqlite => &["run_events", "event_meta", "run_expiry", "run_inputs"],
            Dialect::Postgres => &[
                "run_seqs",
                "run_events",
                "event_meta",
                "run_expiry",
                "run_inputs",
            ],
        }
    }
}

/// A statement written once, with `?1`, `?2`… placeholders, in each dialect's text: the
/// PostgreSQL text is the same with `$1`, `$2`…, plus what only PostgreSQL needs (built at
/// compile time by [`sql!`]).
#[derive(Debug, Clone, Copy)]
pub struct Sql {
    pub sqlite: &'static str,
    pub postgres: &'static str,
}

impl Sql {
    pub fn get(&self, d: Dialect) -> &'static str {
        match d {
            Dialect::Sqlite => self.sqlite,
            Dialect::Postgres => self.postgres,
        }
    }
}

/// `s` with each `?` that starts a numbered placeholder (`?1`) turned into `$`; the length
/// does not change. For [`sql!`].
pub const fn dollars<const N: usize>(s: &str) -> [u8; N] {
    let b = s.as_bytes();
    let mut out = [0u8; N];
    let mut i = 0;
    while i < N {
        out[i] = if b[i] == b'?' && i + 1 < N && b[i + 1].is_ascii_digit() {
            b'$'
        } else {
            b[i]
        };
        i += 1;
    }
    out
}

/// A [`Sql`] statement from its SQLite text (`?1` placeholders), optionally with a tail
/// only PostgreSQL gets (`pg: " ON CONFLICT (…) DO NOTHING"`). The text is a literal or a
/// `concat!(…)` of literals and macros that give one (a column list shared by statements).
macro_rules! sql {
    ($sqlite:literal) => {
        $crate::store::sql::sql!(@make [$sqlite], "")
    };
    ($sqlite:literal, pg: $pg:literal) => {
        $crate::store::sql::sql!(@make [$sqlite], $pg)
    };
    (concat!($($part:tt)*)) => {
        $crate::store::sql::sql!(@make [concat!($($part)*)], "")
    };
    (concat!($($part:tt)*), pg: $pg:literal) => {
        $crate::store::sql::sql!(@make [concat!($($part)*)], $pg)
    };
    (@make [$($sqlite:tt)*], $pg:literal) => {{
        const PG: &str = concat!($($sqlite)*, $pg);
        const PG_BYTES: [u8; PG.len()] = $crate::store::sql::dollars(PG);
        const SQL: $crate::store::sql::Sql = $crate::store::sql::Sql {
            sqlite: $($sqlite)*,
            postgres: match std::str::from_utf8(&PG_BYTES) {
                Ok(s) => s,
                Err(_) => panic!("not UTF-8"),
            },
        };
        SQL
    }};
}
pub(crate) use sql;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_text_gives_both_dialects() {
        const S: Sql =
            sql!("INSERT INTO t (a, b) VALUES (?1, ?2) -- '?'", pg: " ON CONFLICT DO NOTHING");
        assert_eq!(S.sqlite, "INSERT INTO t (a, b) VALUES (?1, ?2) -- '?'");
        assert_eq!(
            S.postgres,
            "INSERT INTO t (a, b) VALUES ($1, $2) -- '?' ON CONFLICT DO NOTHING"
        );
    }
}
