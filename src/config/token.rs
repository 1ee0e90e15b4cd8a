//! [`TokenSource`]: where one token comes from, as a section writes it (a value, a file
//! holding it, or an environment variable naming it), and the one resolver and the one
//! format check every token of every section and namespace goes through.

use std::path::Path;

use super::ConfigError;
use crate::secret::Secret;

/// One token's sources, as written. Sections lend theirs (`AuthConfig::store_token_source`,
/// `NamespaceConfig::token_source`, ...), so the key in every message is the one to fix.
#[derive(Debug, Clone)]
pub struct TokenSource<'a> {
    /// The token's key: `auth.store_token`, `namespaces[a].api_token`, `bridge.token`.
    pub key: String,
    pub value: Option<&'a Secret>,
    /// A file whose content (trimmed) is the token: `<key>_file`.
    pub file: Option<&'a Path>,
    /// An environment variable holding the token: `<key>_env` (namespaces only).
    pub env: Option<&'a str>,
}

impl TokenSource<'_> {
    /// How many of the sources are set.
    pub fn sources_set(&self) -> usize {
        usize::from(self.value.is_some())
            + usize::from(self.file.is_some())
            + usize::from(self.env.is_some())
    }

    /// Whether any source is set.
    pub fn is_set(&self) -> bool {
        self.sources_set() > 0
    }

    /// The token: the value, else the file's content, else the environment variable
    /// (`getenv` is `std::env::var` outside tests); `None` when no source is set. The token
    /// is checked with [`check_token`], under the key of the source it came from.
    pub fn resolve(
        &self,
        getenv: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Secret>, ConfigError> {
        let key = &self.key;
        let (token, from) = if let Some(v) = self.value {
            (v.clone(), key.to_string())
        } else if let Some(path) = self.file {
            let text = std::fs::read_to_string(path).map_err(|e| {
                ConfigError::Invalid(format!("{key}_file: cannot read {}: {e}", path.display()))
            })?;
            (Secret::new(text.trim().to_string()), format!("{key}_file"))
        } else if let Some(var) = self.env {
            let value = getenv(var).ok_or_else(|| {
                ConfigError::Invalid(format!("{key}_env: environment variable {var} is not set"))
            })?;
            (Secret::new(value), format!("{key}_env"))
        } else {
            return Ok(None);
        };
        check_token(&from, &token)?;
        Ok(Some(token))
    }
}

/// A token must fit in an HTTP header: visible ASCII, no spaces. `key` names it in the
/// message (`auth.store_token`).
pub fn check_token(key: &str, token: &Secret) -> Result<(), ConfigError> {
    let t = token.expose();
    if t.is_empty() {
        return Err(ConfigError::Invalid(format!("{key} is empty")));
    }
    if !t.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ConfigError::Invalid(format!(
            "{key} must be visible ASCII without spaces"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn the_value_wins_then_the_file_then_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t");
        std::fs::write(&file, "from-file\n").unwrap();
        let value = Secret::new("from-value".into());
        let env = |k: &str| (k == "T").then(|| "from-env".to_string());
        let all = TokenSource {
            key: "x.token".into(),
            value: Some(&value),
            file: Some(&file),
            env: Some("T"),
        };
        assert_eq!(all.sources_set(), 3);
        assert_eq!(all.resolve(&env).unwrap().unwrap().expose(), "from-value");
        let file_env = TokenSource { value: None, ..all };
        assert_eq!(
            file_env.resolve(&env).unwrap().unwrap().expose(),
            "from-file"
        );
        let env_only = TokenSource {
            file: None,
            ..file_env
        };
        assert_eq!(
            env_only.resolve(&env).unwrap().unwrap().expose(),
            "from-env"
        );
        let none = TokenSource {
            env: None,
            ..env_only
        };
        assert!(!none.is_set());
        assert!(none.resolve(&env).unwrap().is_none());
    }

    #[test]
    fn a_bad_or_missing_token_names_the_key_it_came_from() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t");
        std::fs::write(&file, "two words").unwrap();
        let bad_file = TokenSource {
            key: "a.token".into(),
            value: None,
            file: Some(&file),
            env: None,
        };
        let err = bad_file.resolve(&no_env).unwrap_err().to_string();
        assert!(err.contains("a.token_file must be visible ASCII"), "{err}");
        let missing = dir.path().join("nope");
        let err = TokenSource {
            file: Some(&missing),
            ..bad_file.clone()
        }
        .resolve(&no_env)
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("a.token_file: cannot read") && err.contains("nope"),
            "{err}"
        );
        let err = TokenSource {
            file: None,
            env: Some("UNSET"),
            ..bad_file.clone()
        }
        .resolve(&no_env)
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("a.token_env: environment variable UNSET"),
            "{err}"
        );
        let empty = Secret::new(String::new());
        let err = TokenSource {
            file: None,
            value: Some(&empty),
            ..bad_file.clone()
        }
        .resolve(&no_env)
        .unwrap_err()
        .to_string();
        assert!(err.contains("a.token is empty"), "{err}");
    }
}
