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

impl<'de> serde::Deserialize<'de> for Secret {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Secret::new)
    }
}

/// In the config reference (`callbackd print-config`): a string, never shown with a value.
impl schemars::JsonSchema for Secret {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Secret".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "writeOnly": true })
    }
}

/// The URL with its password replaced by `***`, for messages and logs.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_string();
    // URL form: scheme://user:password@host
    if let Some(scheme_end) = out.find("://") {
        let rest_start = scheme_end + 3;
        let authority_end = out[rest_start..]
            .find(['/', '?'])
            .map_or(out.len(), |i| rest_start + i);
        if let Some(at) = out[rest_start..authority_end].rfind('@') {
            let userinfo = &out[rest_start..rest_start + at];
            if let Some(colon) = userinfo.find(':') {
                out.replace_range(rest_start + colon + 1..rest_start + at, "***");
            }
        }
    }
    // password=... in a query string or key=value form.
    for key in ["password="] {
        let mut from = 0;
        while let Some(i) = out[from..].find(key) {
            let start = from + i + key.len();
            let end = out[start..]
                .find(['&', ' '])
                .map_or(out.len(), |j| start + j);
            out.replace_range(start..end, "***");
            from = start + 3;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{redact_url, Secret};

    #[test]
    fn debug_hides_the_value_and_generated_tokens_are_hex() {
        let s = Secret::generate().unwrap();
        assert_eq!(s.expose().len(), 64);
        assert!(s.expose().bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(format!("{s:?}"), "Secret(***)");
        assert_ne!(s, Secret::generate().unwrap());
    }

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            redact_url("postgres://u:s3cret@db:5432/x"),
            "postgres://u:***@db:5432/x"
        );
        assert_eq!(
            redact_url("postgresql://u@db/x?password=s3cret&sslmode=disable"),
            "postgresql://u@db/x?password=***&sslmode=disable"
        );
        assert_eq!(
            redact_url("host=db user=u password=s3cret dbname=x"),
            "host=db user=u password=*** dbname=x"
        );
        assert_eq!(redact_url("postgres://db/x"), "postgres://db/x");
    }
}
