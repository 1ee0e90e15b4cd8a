//! [`Conditions`]: a filter translated into a `WHERE` clause.

use super::{Dialect, Value};

/// `ns = ?1 AND …` under construction, always starting with the namespace. The
/// placeholders are numbered, so the parameters can be used again by a statement that
/// wraps the conditions.
pub struct Conditions<'a> {
    dialect: Dialect,
    sql: Vec<String>,
    params: Vec<Value<'a>>,
}

impl<'a> Conditions<'a> {
    pub fn new(dialect: Dialect, ns: &'a str) -> Self {
        Conditions {
            dialect,
            sql: vec![format!("ns = {}", dialect.param(1))],
            params: vec![Value::Text(ns)],
        }
    }

    fn next(&self) -> usize {
        self.params.len() + 1
    }

    pub fn eq(&mut self, column: &str, value: &'a str) {
        self.sql
            .push(format!("{column} = {}", self.dialect.param(self.next())));
        self.params.push(Value::Text(value));
    }

    /// `column` in `list`; `None` adds nothing (no constraint).
    pub fn in_list(&mut self, column: &str, list: Option<&'a [String]>) {
        if let Some(list) = list {
            self.sql.push(self.dialect.in_list(column, self.next()));
            self.params.push(Value::TextList(list));
        }
    }

    /// A condition from `sql` given the numbers of the parameters it adds; `params` in order.
    pub fn raw<const N: usize>(
        &mut self,
        sql: impl Fn(Dialect, usize) -> String,
        params: [Value<'a>; N],
    ) {
        self.sql.push(sql(self.dialect, self.next()));
        self.params.extend(params);
    }

    pub fn sql(&self) -> String {
        self.sql.join(" AND ")
    }

    pub fn params(&self) -> &[Value<'a>] {
        &self.params
    }

    /// The number the next parameter after these would get.
    pub fn next_param(&self) -> usize {
        self.next()
    }

    pub fn into_params(self) -> Vec<Value<'a>> {
        self.params
    }
}
