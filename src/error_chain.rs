//! An error and its causes as one line of text, each cause said once.
//!
//! A thiserror variant like `#[error("cannot read config file {path}: {source}")]` already
//! puts its source in its own message; anyhow's `{:#}` then appends the source again
//! (`... No such file or directory (os error 2): No such file or directory (os error 2)`), and a
//! TOML error, several lines long, is printed twice. [`Chain`] skips a cause whose text the
//! message before it already contains, so both styles of error read right.

use std::fmt;

/// Displays `error: cause: cause`, leaving out every cause already in the message before it.
pub struct Chain<'a>(pub &'a anyhow::Error);

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut previous = String::new();
        let mut first = true;
        for cause in self.0.chain() {
            let text = cause.to_string();
            let trimmed = text.trim_end();
            if trimmed.is_empty() || previous.contains(trimmed) {
                continue;
            }
            if !first {
                f.write_str(": ")?;
            }
            f.write_str(trimmed)?;
            first = false;
            previous = text;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read config file {path}: {source}")]
    struct Read {
        path: String,
        source: std::io::Error,
    }

    fn not_found() -> std::io::Error {
        std::io::Error::from(std::io::ErrorKind::NotFound)
    }

    #[test]
    fn a_source_the_message_already_shows_is_not_repeated() {
        let e = anyhow::Error::new(Read {
            path: "nope.toml".into(),
            source: not_found(),
        });
        let text = Chain(&e).to_string();
        assert_eq!(
            text,
            format!("cannot read config file nope.toml: {}", not_found())
        );
    }

    #[test]
    fn context_over_a_plain_error_keeps_every_cause_once() {
        let e = Err::<(), _>(not_found())
            .context("opening the store")
            .context("starting")
            .unwrap_err();
        assert_eq!(
            Chain(&e).to_string(),
            format!("starting: opening the store: {}", not_found())
        );
    }

    #[test]
    fn a_multi_line_source_is_printed_once() {
        let source = toml::from_str::<toml::Table>("a = = 1\n").unwrap_err();
        let block = source.to_string();
        let e = anyhow::Error::new(source).context(format!("invalid config file c.toml: {block}"));
        let text = Chain(&e).to_string();
        assert_eq!(text.matches("TOML parse error").count(), 1, "{text}");
        assert!(!text.ends_with(char::is_whitespace), "{text:?}");
    }
}
