//! Columns that stay in line: each column as wide as its widest cell on the page (ids of
//! any length, a long agent id from another SDK, never push the next column out of line),
//! cells that could be long (names, outputs) cut to a width with `…`.

/// One page of a table: a header and rows, each row a cell per column. The last column is
/// not padded (a workspace path, an output) so nothing trails.
pub struct Table {
    header: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&'static str]) -> Table {
        Table {
            header: header.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Adds a row. Its cells are run data (names, ids, outputs a model or another client
    /// wrote) on their way to a terminal: control characters are escaped here, once for
    /// every table, so that no cell can move the cursor, recolour or clear the screen.
    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(
            row.into_iter()
                .map(|c| super::render::one_line(&c))
                .collect(),
        );
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as lines, with its header when `header` (once per command, not per page).
    pub fn render(&self, header: bool) -> String {
        let n = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let mut line = |cells: &mut dyn Iterator<Item = &str>| {
            let mut text = String::new();
            for (i, cell) in cells.enumerate() {
                if i > 0 {
                    text.push_str("  ");
                }
                text.push_str(cell);
                if i + 1 < n {
                    let pad = widths[i].saturating_sub(cell.chars().count());
                    text.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        };
        if header {
            line(&mut self.header.iter().copied());
        }
        for row in &self.rows {
            line(&mut row.iter().map(String::as_str));
        }
        out
    }
}

/// `text` cut to `max` characters, the cut shown by `…`.
pub fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// `2026-12-06 06:22:15` of an RFC 3339 time (a date on every time, seconds enough for a
/// list; the JSON keeps the full value).
pub fn when(rfc3339: &str) -> String {
    match rfc3339.get(..19) {
        Some(t) => t.replacen('T', " ", 1),
        None => rfc3339.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_stay_in_line_with_a_long_id() {
        let mut t = Table::new(&["SESSION", "NAME", "WORKSPACE"]);
        t.push(vec!["a1".into(), "plan".into(), "/ws".into()]);
        t.push(vec![
            "agent-0123456789-0123456789-0123456789-0123456789".into(),
            "x".into(),
            "/w".into(),
        ]);
        let text = t.render(true);
        let lines: Vec<&str> = text.lines().collect();
        let at = lines[0].find("WORKSPACE").unwrap();
        assert_eq!(lines[1].find('/'), Some(at), "{text}");
        assert_eq!(lines[2].find('/'), Some(at), "{text}");
        assert!(lines[1].starts_with("a1  "), "{text}");
        assert!(!text.lines().any(|l| l.ends_with(' ')), "{text:?}");
        assert!(!Table::new(&["A"]).render(false).contains('A'));
    }

    #[test]
    fn no_control_character_of_a_cell_reaches_the_terminal() {
        // A session named by another client, a model id, a workspace path: run data.
        let mut t = Table::new(&["SESSION", "NAME"]);
        t.push(vec![
            "s1".into(),
            "\u{1b}[2J\u{1b}[31mred\r\nfake line\u{7}".into(),
        ]);
        let text = t.render(true);
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert_eq!(text.lines().count(), 2, "{text:?}");
        assert!(text.contains("\\u{1b}[2J"), "{text:?}");
    }

    #[test]
    fn long_cells_are_cut_and_times_have_their_date() {
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abc", 4), "abc");
        assert_eq!(when("2026-12-06T06:22:15.158Z"), "2026-12-06 06:22:15");
        assert_eq!(when(""), "");
    }
}
