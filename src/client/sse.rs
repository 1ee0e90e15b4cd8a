//! An incremental Server-Sent Events parser (the WHATWG rules): bytes in, events out, in
//! whatever pieces the connection delivers them.

/// One parsed item of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseItem {
    /// An event. `id` is `None` when it had no `id:` line: the run API gives one to exactly
    /// its durable events, so this is what a resuming client keys on.
    Event {
        id: Option<String>,
        event: Option<String>,
        data: String,
        retry: Option<u64>,
    },
    /// A `:` comment line (the API's `: keepalive`): proof the connection is alive.
    Comment(String),
}

/// Feed it chunks with [`push`](Self::push); it keeps a partial line between calls.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    /// The previous chunk ended in CR: a LF at the start of the next one belongs to it.
    after_cr: bool,
    data: Vec<String>,
    id: Option<String>,
    event: Option<String>,
    retry: Option<u64>,
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses a chunk; returns the items it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseItem> {
        let mut out = Vec::new();
        for &b in chunk {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' => self.end_line(&mut out),
                b'\r' => {
                    self.end_line(&mut out);
                    self.after_cr = true;
                }
                _ => self.line.push(b),
            }
        }
        out
    }

    fn end_line(&mut self, out: &mut Vec<SseItem>) {
        let line = String::from_utf8_lossy(&std::mem::take(&mut self.line)).into_owned();
        if line.is_empty() {
            if !self.data.is_empty() || self.id.is_some() || self.event.is_some() {
                out.push(SseItem::Event {
                    id: self.id.take(),
                    event: self.event.take(),
                    data: std::mem::take(&mut self.data).join("\n"),
                    retry: self.retry.take(),
                });
            }
            self.data.clear();
            self.retry = None;
            return;
        }
        if let Some(comment) = line.strip_prefix(':') {
            out.push(SseItem::Comment(comment.trim().to_string()));
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_str(), ""),
        };
        match field {
            "data" => self.data.push(value.to_string()),
            "id" if !value.contains('\0') => self.id = Some(value.to_string()),
            "event" => self.event = Some(value.to_string()),
            "retry" => self.retry = value.parse().ok(),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(id: Option<&str>, data: &str) -> SseItem {
        SseItem::Event {
            id: id.map(str::to_string),
            event: None,
            data: data.to_string(),
            retry: None,
        }
    }

    #[test]
    fn events_comments_and_every_line_ending() {
        let text =
            b"id: 1\ndata: {\"a\":1}\n\n: keepalive\r\ndata: x\r\ndata: y\r\n\r\nid:2\rdata:z\r\r";
        let got = SseParser::new().push(text);
        assert_eq!(
            got,
            vec![
                ev(Some("1"), "{\"a\":1}"),
                SseItem::Comment("keepalive".into()),
                ev(None, "x\ny"),
                ev(Some("2"), "z"),
            ]
        );
    }

    #[test]
    fn any_split_of_the_input_gives_the_same_events() {
        let text: &[u8] =
            b"retry: 500\ndata: {\"type\":\"reconnect\"}\n\nid: 7\r\ndata: \xc3\xa9t\xc3\xa9\r\n\r\n";
        let whole = SseParser::new().push(text);
        assert_eq!(whole.len(), 2);
        for cut in 0..text.len() {
            let mut p = SseParser::new();
            let mut got = p.push(&text[..cut]);
            got.extend(p.push(&text[cut..]));
            assert_eq!(got, whole, "split at {cut}");
        }
        // One byte at a time, too (a CR at a chunk's end must wait for its LF).
        let mut p = SseParser::new();
        let got: Vec<_> = text.iter().flat_map(|b| p.push(&[*b])).collect();
        assert_eq!(got, whole);
        match &whole[0] {
            SseItem::Event { retry, id, .. } => {
                assert_eq!(*retry, Some(500));
                assert_eq!(*id, None);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_unfinished_event_is_not_delivered() {
        let mut p = SseParser::new();
        assert!(p.push(b"id: 3\ndata: {\"half\"").is_empty());
    }
}
