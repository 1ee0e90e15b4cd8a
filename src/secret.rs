//! [`Secret`]: a string that never shows up in `Debug` output or logs.

use std::sync::Arc;

/// A bearer token or other secret. `Debug` prints `Secret(***)`; the value is only reachable
/// through [`Secret::expose`], which makes every use greppable.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<str>);

impl Secret {
    pub fn new(value: String) -> Self {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// 32 random bytes from the OS, hex encoded (64 characters).
    pub fn generate() -> std::io::Result<Self> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(Secret::new(
            bytes.iter().map(|b| format!("{b:02x}")).collect::<String>(),
        ))
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

#[cfg(test)]
mod tests {
    use super::Secret;

    #[test]
    fn debug_hides_the_value_and_generated_tokens_are_hex() {
        let s = Secret::generate().unwrap();
        assert_eq!(s.expose().len(), 64);
        assert!(s.expose().bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(format!("{s:?}"), "Secret(***)");
        assert_ne!(s, Secret::generate().unwrap());
    }
}
