//! Resolving the two bearer tokens: explicit (environment or config value), from a file, or
//! generated once and kept next to the database so a restarted daemon and a restarted
//! bridge keep agreeing.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::config::{ApiConfig, AuthConfig, ConfigError};
use crate::secret::Secret;

/// The daemon's bearer tokens: the two the bridge presents (store service, tools), and the
/// run API's (read-write, and an optional read-only one). All of them differ, so no service
/// accepts another's token.
#[derive(Debug, Clone)]
pub struct Tokens {
    pub store: Secret,
    pub tool: Secret,
    pub api: Secret,
    pub api_read: Option<Secret>,
}

/// Where generated tokens are kept for the database at `db`: `<dir>/<stem>.tokens`.
pub fn generated_path(db: &Path) -> PathBuf {
    let stem = db
        .file_stem()
        .map_or_else(|| "callbackd".into(), |s| s.to_string_lossy().into_owned());
    db.with_file_name(format!("{stem}.tokens"))
}

#[derive(Deserialize)]
struct Generated {
    store_token: Secret,
    tool_token: Secret,
    /// Absent in files written before the run API: added on first use.
    api_token: Option<Secret>,
    api_read_token: Option<Secret>,
}

/// Resolves both tokens; generates and persists the missing ones if neither source names
/// them. Only the daemon (`serve`, `run`) calls this; other commands [`find`] them.
pub fn resolve(auth: &AuthConfig, api: &ApiConfig, db: &Path) -> Result<Tokens, ConfigError> {
    resolve_with(auth, api, db, Missing::Generate)
}

/// The tokens the daemon of this configuration uses, for commands that only pass them on
/// (`bridge-args`): the same sources as [`resolve`], but a missing tokens file (or run API
/// tokens not yet added to it) is [`ConfigError::NoTokens`], never a new token the running
/// daemon would reject.
pub fn find(auth: &AuthConfig, api: &ApiConfig, db: &Path) -> Result<Tokens, ConfigError> {
    resolve_with(auth, api, db, Missing::Refuse)
}

/// What to do when the generated tokens file does not exist.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Missing {
    Generate,
    Refuse,
}

fn resolve_with(
    auth: &AuthConfig,
    api: &ApiConfig,
    db: &Path,
    missing: Missing,
) -> Result<Tokens, ConfigError> {
    let env = |k: &str| std::env::var(k).ok();
    let store = auth.store_token_source().resolve(&env)?;
    let tool = auth.tool_token_source().resolve(&env)?;
    let api_rw = api.token_source().resolve(&env)?;
    let read_source = api.read_token_source();
    let api_read = read_source.resolve(&env)?;
    let explicit_read = read_source.is_set();
    let tokens = match (store, tool, api_rw) {
        (Some(store), Some(tool), Some(api)) => Tokens {
            store,
            tool,
            api,
            api_read,
        },
        (s, t, a) => {
            let path = generated_path(db);
            let mut g = generated(&path, missing)?;
            if a.is_none() && g.api_token.is_none() && missing == Missing::Refuse {
                return Err(ConfigError::NoTokens { path });
            }
            if missing == Missing::Generate && (g.api_token.is_none() || g.api_read_token.is_none())
            {
                add_api_tokens(&path, &mut g)?;
            }
            Tokens {
                store: s.unwrap_or(g.store_token),
                tool: t.unwrap_or(g.tool_token),
                api: a.or(g.api_token).expect("added above"),
                api_read: if explicit_read {
                    api_read
                } else {
                    g.api_read_token
                },
            }
        }
    };
    let all = [
        ("store", Some(&tokens.store)),
        ("tool", Some(&tokens.tool)),
        ("api", Some(&tokens.api)),
        ("api read-only", tokens.api_read.as_ref()),
    ];
    for (i, (a, x)) in all.iter().enumerate() {
        for (b, y) in &all[i + 1..] {
            if x.is_some() && x == y {
                return Err(ConfigError::Invalid(format!(
                    "the {a} and {b} tokens must differ, so that no service accepts another's"
                )));
            }
        }
    }
    Ok(tokens)
}

/// Appends generated API tokens to a tokens file written before the run API existed (the
/// file is never rewritten, so the bridge's tokens in it stay as they are).
fn add_api_tokens(path: &Path, g: &mut Generated) -> Result<(), ConfigError> {
    let err = |source| ConfigError::TokenFile {
        path: path.to_path_buf(),
        source,
    };
    let mut text = String::new();
    if g.api_token.is_none() {
        let t = Secret::generate().map_err(err)?;
        text.push_str(&format!("api_token = \"{}\"\n", t.expose()));
        g.api_token = Some(t);
    }
    if g.api_read_token.is_none() {
        let t = Secret::generate().map_err(err)?;
        text.push_str(&format!("api_read_token = \"{}\"\n", t.expose()));
        g.api_read_token = Some(t);
    }
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(err)?;
    file.write_all(text.as_bytes()).map_err(err)?;
    file.sync_all().map_err(err)?;
    tracing::info!(path = %path.display(), "added run API tokens to the tokens file");
    Ok(())
}

/// Reads the generated tokens file, creating it (mode 0600, never overwritten) if missing
/// and `missing` allows.
fn generated(path: &Path, missing: Missing) -> Result<Generated, ConfigError> {
    let err = |source| ConfigError::TokenFile {
        path: path.to_path_buf(),
        source,
    };
    match std::fs::read_to_string(path) {
        Ok(text) => {
            if let Ok(meta) = std::fs::metadata(path) {
                if meta.permissions().mode() & 0o077 != 0 {
                    tracing::warn!(path = %path.display(), "token file is readable by other users; chmod 600 it");
                }
            }
            tracing::info!(path = %path.display(), "callback tokens from the tokens file");
            return toml::from_str(&text).map_err(|e| {
                ConfigError::Invalid(format!("token file {} is malformed: {e}", path.display()))
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && missing == Missing::Refuse => {
            return Err(ConfigError::NoTokens {
                path: path.to_path_buf(),
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let g = Generated {
        store_token: Secret::generate().map_err(err)?,
        tool_token: Secret::generate().map_err(err)?,
        api_token: Some(Secret::generate().map_err(err)?),
        api_read_token: Some(Secret::generate().map_err(err)?),
    };
    let expose = |t: &Option<Secret>| t.as_ref().map_or("", |t| t.expose()).to_string();
    let text = format!(
        "# Bearer tokens generated by callbackd. Keep this file private.\n\
         # store_token, tool_token: the bridge's callbacks; api_token, api_read_token: the run API.\n\
         store_token = \"{}\"\ntool_token = \"{}\"\napi_token = \"{}\"\napi_read_token = \"{}\"\n",
        g.store_token.expose(),
        g.tool_token.expose(),
        expose(&g.api_token),
        expose(&g.api_read_token),
    );
    let mut file = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(f) => f,
        // Another process created it between our read and our create: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return generated(path, missing),
        Err(e) => return Err(err(e)),
    };
    file.write_all(text.as_bytes()).map_err(err)?;
    file.sync_all().map_err(err)?;
    tracing::info!(path = %path.display(), "generated new callback tokens");
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_are_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        let api = Default::default();
        let a = resolve(&AuthConfig::default(), &api, &db).unwrap();
        let b = resolve(&AuthConfig::default(), &api, &db).unwrap();
        assert_eq!(a.api, b.api);
        assert_ne!(a.api, a.store);
        assert_ne!(Some(&a.api), a.api_read.as_ref());
        assert_eq!(a.store, b.store);
        assert_eq!(a.tool, b.tool);
        assert_ne!(a.store, a.tool);
        let mode = std::fs::metadata(dir.path().join("x.tokens"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn find_never_generates_and_reads_what_resolve_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        let (auth, api) = (AuthConfig::default(), Default::default());
        let err = find(&auth, &api, &db).unwrap_err();
        assert!(
            matches!(&err, ConfigError::NoTokens { path } if path == &dir.path().join("x.tokens"))
        );
        assert!(err.to_string().contains("callbackd serve"), "{err}");
        assert!(!dir.path().join("x.tokens").exists());
        let made = resolve(&auth, &api, &db).unwrap();
        let found = find(&auth, &api, &db).unwrap();
        assert_eq!((made.store, made.tool), (found.store, found.tool));
        assert_eq!(made.api, found.api);
    }

    #[test]
    fn find_does_not_add_run_api_tokens_to_an_older_file() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        let file = dir.path().join("x.tokens");
        let old = format!(
            "store_token = \"{}\"\ntool_token = \"{}\"\n",
            "s".repeat(20),
            "t".repeat(20)
        );
        std::fs::write(&file, &old).unwrap();
        let err = find(&AuthConfig::default(), &Default::default(), &db).unwrap_err();
        assert!(matches!(err, ConfigError::NoTokens { .. }), "{err}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), old);
    }

    #[test]
    fn explicit_tokens_win_and_must_differ() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        let auth = AuthConfig {
            store_token: Some(Secret::new("s".repeat(20))),
            tool_token: Some(Secret::new("t".repeat(20))),
            ..Default::default()
        };
        let api = ApiConfig {
            token: Some(Secret::new("a".repeat(20))),
            ..Default::default()
        };
        let t = resolve(&auth, &api, &db).unwrap();
        assert_eq!(t.store.expose(), "s".repeat(20));
        assert!(!dir.path().join("x.tokens").exists());
        let same = AuthConfig {
            store_token: Some(Secret::new("same".into())),
            tool_token: Some(Secret::new("same".into())),
            ..Default::default()
        };
        assert!(resolve(&same, &api, &db).is_err());
    }
}
