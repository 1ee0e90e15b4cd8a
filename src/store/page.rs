//! The contract's list page, `{"items":[...]}` plus `"nextCursor"`/`"nextOffset"` only
//! while more items remain, written once for every backend. Backends select `limit + 1`
//! rows; the row beyond the page is what proves that more remain.

/// Writes one page. Push items until [`PageWriter::is_full`]; if another row exists then,
/// finish with [`PageWriter::finish_with_next`], otherwise [`PageWriter::finish`].
pub struct PageWriter {
    out: String,
    n: usize,
    limit: usize,
}

impl PageWriter {
    pub fn new(limit: usize) -> Self {
        PageWriter {
            out: String::from(r#"{"items":["#),
            n: 0,
            limit,
        }
    }

    /// Whether the page holds `limit` items (a further row means more remain).
    pub fn is_full(&self) -> bool {
        self.n == self.limit
    }

    /// Whether the page has no item yet (an empty page never carries a cursor).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Appends one item, written by `item` (JSON text).
    pub fn push<E>(&mut self, item: impl FnOnce(&mut String) -> Result<(), E>) -> Result<(), E> {
        if self.n > 0 {
            self.out.push(',');
        }
        let before = self.out.len();
        item(&mut self.out)?;
        if self.n == 0 {
            // Size the page from its first item once, rather than doubling the buffer (and
            // copying it) five or six times on the way to a few hundred kilobytes.
            // Twice the estimate: items vary in size, and untouched capacity costs nothing.
            let guess = (self.out.len() - before).saturating_mul(2 * self.limit.min(1000));
            self.out.reserve(guess.min(1 << 20));
        }
        self.n += 1;
        Ok(())
    }

    /// The page without a cursor: nothing follows.
    pub fn finish(mut self) -> String {
        self.out.push_str("]}");
        self.out
    }

    /// The page with `"<key>": <next_json>`: more items follow.
    pub fn finish_with_next(mut self, key: &str, next_json: &str) -> String {
        self.out.push_str("],");
        super::json::push_json_str(&mut self.out, key);
        self.out.push(':');
        self.out.push_str(next_json);
        self.out.push('}');
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_only_while_more_remain() {
        let mut p = PageWriter::new(2);
        for i in ["1", "2"] {
            p.push(|out| {
                out.push_str(i);
                Ok::<_, ()>(())
            })
            .unwrap();
        }
        assert!(p.is_full());
        assert_eq!(
            p.finish_with_next("nextOffset", "\"2\""),
            r#"{"items":[1,2],"nextOffset":"2"}"#
        );
        assert_eq!(PageWriter::new(0).finish(), r#"{"items":[]}"#);
    }
}
