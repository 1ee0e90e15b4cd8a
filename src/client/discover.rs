//! Where a client command finds the daemon and its token, and how it says so when the
//! request fails: the URL and the tokens file it used are named in the error, so a
//! "connection refused" or a `401` says which daemon and which token were tried.
//!
//! URL: `--url` / `CALLBACKD_URL`; else a listen address the user chose (`--listen`,
//! `CALLBACKD_LISTEN`, `server.listen` in the config file); else the runtime file of a
//! running daemon in the data directory ([`crate::supervisor::runtime_file`]); else the default listen
//! address.

use std::path::Path;

use anyhow::Context;

use super::http::{ApiClient, ClientError};
use crate::cli::ClientArgs;
use crate::config::Config;
use crate::store::Namespace;

/// Where the URL and the token of a client came from, for its errors.
#[derive(Debug, Clone)]
pub struct Origin {
    pub url: String,
    pub url_from: String,
    pub token_from: String,
}

impl Origin {
    /// `e`, with the URL and the token's source in front when it is the daemon's answer
    /// (or its absence); other errors (a closed stdout, bad input) are left as they are.
    pub fn explain(&self, e: anyhow::Error) -> anyhow::Error {
        if e.downcast_ref::<ClientError>().is_some() {
            e.context(format!(
                "callbackd at {} (URL: {}; token: {})",
                self.url, self.url_from, self.token_from
            ))
        } else {
            e
        }
    }
}

/// The client of `args`: URL and token from the flags, the environment, a running daemon's
/// runtime file or the configuration, with where each came from.
pub fn connect(args: &ClientArgs) -> anyhow::Result<(ApiClient, Origin)> {
    let mut loaded: Option<Config> = None;
    let mut config = || -> anyhow::Result<Config> {
        if let Some(c) = &loaded {
            return Ok(c.clone());
        }
        let c = args.config.load()?;
        loaded = Some(c.clone());
        Ok(c)
    };
    let (url, url_from) = match &args.url {
        Some(u) => (u.clone(), "--url or CALLBACKD_URL".to_string()),
        None => {
            let ns = args.namespace.clone().unwrap_or_default();
            let found = locate(&args.config, &config()?, &ns)?;
            (found.url, found.from)
        }
    };
    let (token, token_from) = match (&args.token, &args.namespace) {
        (Some(t), _) => (t.clone(), "--token or CALLBACKD_API_TOKEN".to_string()),
        (None, Some(ns)) if *ns != Namespace::default() => {
            let c = config()?;
            let (i, entry) = crate::namespaces::config::entry(&c, ns)?;
            let env = |k: &str| std::env::var(k).ok();
            let token = entry
                .token(i, crate::namespaces::TokenRole::Api, &env)?
                .with_context(|| {
                    format!(
                        "{} has no api_token: the run API is closed to it",
                        entry.label(i)
                    )
                })?
                .expose()
                .to_string();
            (token, format!("api_token of {}", entry.label(i)))
        }
        (None, _) => {
            let c = config()?;
            if let Some(t) = &c.api.token {
                (
                    t.expose().to_string(),
                    "api.token of the configuration".into(),
                )
            } else if let Some(path) = &c.api.token_file {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading api.token_file {}", path.display()))?;
                (
                    text.trim().to_string(),
                    format!("api.token_file {}", path.display()),
                )
            } else {
                // Read, never generated: a client must not create the daemon's tokens file.
                let path = crate::tokens::generated_path(&c.store.path);
                (
                    token_from_file(&path)?,
                    format!("api_token of the tokens file {}", path.display()),
                )
            }
        }
    };
    let origin = Origin {
        url: url.clone(),
        url_from,
        token_from,
    };
    Ok((ApiClient::new(&url, token)?, origin))
}

/// Where a daemon listens, as a command without `--url` finds it, and why there.
#[derive(Debug, Clone)]
pub struct Located {
    pub url: String,
    /// Said in errors: "the runtime file …", "the configured listen address …".
    pub from: String,
}

/// The daemon a command of namespace `ns` talks to when no URL was given: a listen address
/// the user chose (`--listen`, `CALLBACKD_LISTEN`, `server.listen`); else the runtime file of
/// the running daemon that fits best ([`crate::supervisor::runtime_file::find`], which says
/// on stderr which it took when several run); else the default listen address.
pub fn locate(
    args: &crate::cli::ConfigArgs,
    c: &Config,
    ns: &Namespace,
) -> anyhow::Result<Located> {
    let chosen =
        crate::supervisor::user_chose_listen(args.config.as_deref(), args.listen.as_deref());
    let dir = crate::supervisor::runtime_file::dir_of(&c.store.path);
    if !chosen {
        if let Some(found) = crate::supervisor::runtime_file::find(&dir, ns)? {
            if let Some(note) = &found.note {
                crate::telemetry::stderr_line(format_args!("callbackd: {note}"));
            }
            return Ok(Located {
                url: found.runtime.url,
                from: format!("the runtime file {}", found.path.display()),
            });
        }
    }
    let addr = c.server.listen_addr()?;
    anyhow::ensure!(
        addr.port() != 0,
        "no --url, and the configured listen address {addr} has port 0 \
         (`callbackd run` picks a free port): pass --url or set CALLBACKD_URL \
         to the `url` of callbackd's ready line"
    );
    let from = if chosen {
        "the configured listen address (--listen, CALLBACKD_LISTEN or server.listen)".to_string()
    } else {
        format!(
            "the default listen address; no running daemon left a runtime file in {}",
            dir.display()
        )
    };
    Ok(Located {
        url: crate::app::base_url(addr),
        from,
    })
}

fn token_from_file(path: &Path) -> anyhow::Result<String> {
    let missing = || {
        format!(
            "no API token: pass --token, set CALLBACKD_API_TOKEN, or run where the daemon's \
             tokens file is ({} has no api_token)",
            path.display()
        )
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => anyhow::bail!(missing()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let table: toml::Table = toml::from_str(&text)
        .with_context(|| format!("the tokens file {} is malformed", path.display()))?;
    match table.get("api_token").and_then(|v| v.as_str()) {
        Some(t) if !t.trim().is_empty() => Ok(t.trim().to_string()),
        _ => anyhow::bail!(missing()),
    }
}
