//! `[[webhooks]]`: where to tell people that something needs them (docs/webhooks.md), as
//! written, and its checks. The daemon's `webhooks` module turns an entry into deliveries;
//! this file only parses and validates, naming the key to fix.

use std::path::PathBuf;

use base64::Engine;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{ConfigError, TokenSource};
use crate::secret::Secret;

/// The events a webhook may be sent, as their `type` is written.
pub const WEBHOOK_EVENTS: [&str; 5] = [
    "approval.required",
    "approval.resolved",
    "question.asked",
    "question.answered",
    "run.ended",
];

/// The default delays between attempts (ms): seconds, then minutes, then hours; the last
/// attempt is made about 28 hours after the first, then the delivery is given up.
pub const DEFAULT_BACKOFF_MS: [u64; 7] = [
    5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000,
];

/// One `[[webhooks]]` entry: an endpoint that receives signed `POST`s (Standard Webhooks).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct WebhookConfig {
    /// The endpoint (`http://`; for `https://` put a TLS proxy next to callbackd). Redirects
    /// are not followed: a 3xx answer is a failed attempt.
    #[schemars(example = &"http://127.0.0.1:9000/hooks/callbackd")]
    pub url: String,
    /// The signing secret, `whsec_` and base64 (the Standard Webhooks form); exactly one of
    /// `secret`, `secret_file` and `secret_env`.
    pub secret: Option<Secret>,
    /// A file holding the signing secret.
    #[schemars(example = &"/run/secrets/callbackd-webhook-secret")]
    pub secret_file: Option<PathBuf>,
    /// An environment variable holding the signing secret.
    #[schemars(example = &"CALLBACKD_WEBHOOK_SECRET")]
    pub secret_env: Option<String>,
    /// The events sent: `approval.required`, `approval.resolved`, `question.asked`,
    /// `question.answered`, `run.ended`; unset: all of them.
    #[schemars(example = ["approval.required", "run.ended"])]
    pub events: Option<Vec<String>>,
    /// Only events of these namespaces; unset: every namespace.
    #[schemars(example = ["default"])]
    pub namespaces: Option<Vec<String>>,
    /// The delays (ms) between attempts: one more attempt per entry, then the delivery is
    /// given up (`failed`). Any non-2xx answer, timeout or refused connection is retried.
    pub retry_backoff_ms: Vec<u64>,
    /// How long one attempt may take, connecting included (ms).
    pub timeout_ms: u64,
    /// The console's address as the receiving people reach it, for the links in the events
    /// (`<console_url>/ui/#/runs/<run>`, never with a token); unset: `http://` and the
    /// address the daemon listens on.
    #[schemars(example = &"https://callbackd.example.com")]
    pub console_url: Option<String>,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        WebhookConfig {
            url: String::new(),
            secret: None,
            secret_file: None,
            secret_env: None,
            events: None,
            namespaces: None,
            retry_backoff_ms: DEFAULT_BACKOFF_MS.to_vec(),
            timeout_ms: 10_000,
            console_url: None,
        }
    }
}

impl WebhookConfig {
    /// `webhooks[i]`, for messages.
    pub fn label(index: usize) -> String {
        format!("webhooks[{index}]")
    }

    /// Checks what can be checked without reading files or the environment: the URL, the
    /// events, the schedule, an inline secret.
    pub fn validate(&self, index: usize) -> Result<(), ConfigError> {
        let label = Self::label(index);
        check_url(&self.url)
            .map_err(|why| ConfigError::Invalid(format!("{label}.url = {:?}: {why}", self.url)))?;
        for event in self.events.iter().flatten() {
            if !WEBHOOK_EVENTS.contains(&event.as_str()) {
                return Err(ConfigError::Invalid(format!(
                    "{label}.events: unknown event {event:?}; the events are {}",
                    WEBHOOK_EVENTS.join(", ")
                )));
            }
        }
        if self.timeout_ms == 0 {
            return Err(ConfigError::Invalid(format!(
                "{label}.timeout_ms must be at least 1"
            )));
        }
        let source = self.secret_source(index);
        match source.sources_set() {
            0 => Err(ConfigError::Invalid(format!(
                "{label}: set one of secret, secret_file and secret_env (a whsec_ signing secret)"
            ))),
            1 => match &self.secret {
                Some(s) => check_secret(&format!("{label}.secret"), s).map(|_| ()),
                None => Ok(()),
            },
            _ => Err(ConfigError::Invalid(format!(
                "{label}: set only one of secret, secret_file and secret_env"
            ))),
        }
    }

    /// The signing key: the bytes after `whsec_` of the secret from the value, the file or
    /// the environment, checked (`getenv` is `std::env::var` outside tests).
    pub fn signing_key(
        &self,
        index: usize,
        getenv: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Vec<u8>, ConfigError> {
        let source = self.secret_source(index);
        let secret = source
            .resolve(getenv)?
            .ok_or_else(|| ConfigError::Invalid(format!("{}: no secret", Self::label(index))))?;
        let from = if self.secret.is_some() {
            format!("{}.secret", Self::label(index))
        } else if self.secret_file.is_some() {
            format!("{}.secret_file", Self::label(index))
        } else {
            format!("{}.secret_env", Self::label(index))
        };
        check_secret(&from, &secret)
    }

    fn secret_source(&self, index: usize) -> TokenSource<'_> {
        TokenSource {
            key: format!("{}.secret", Self::label(index)),
            value: self.secret.as_ref(),
            file: self.secret_file.as_deref(),
            env: self.secret_env.as_deref(),
        }
    }

    /// Whether this endpoint is sent events of `kind` in namespace `ns`.
    pub fn wants(&self, kind: &str, ns: &str) -> bool {
        self.events
            .as_ref()
            .is_none_or(|e| e.iter().any(|x| x == kind))
            && self
                .namespaces
                .as_ref()
                .is_none_or(|n| n.iter().any(|x| x == ns))
    }

    /// A relative secret file is relative to the config file's directory.
    pub(super) fn rebase(&mut self, fix: &dyn Fn(&mut PathBuf)) {
        if let Some(p) = self.secret_file.as_mut() {
            fix(p);
        }
    }
}

/// `http://host[:port]/path`: what the delivery client can reach.
fn check_url(url: &str) -> Result<(), String> {
    if url.is_empty() {
        return Err("a webhook needs a url".into());
    }
    let uri: http::Uri = url
        .parse()
        .map_err(|e| format!("not a URL ({e}); write http://host:port/path"))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => {
            return Err(
                "https:// is not supported: put a TLS proxy next to callbackd and \
                        give its http:// address"
                    .into(),
            )
        }
        _ => return Err("the url must start with http://".into()),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err("the url has no host".into());
    }
    Ok(())
}

/// A Standard Webhooks secret: `whsec_` and the base64 of at least 24 bytes (the
/// specification's 24 to 64). The key is the decoded bytes.
pub fn check_secret(key: &str, secret: &Secret) -> Result<Vec<u8>, ConfigError> {
    let text = secret.expose().trim();
    let Some(b64) = text.strip_prefix("whsec_") else {
        return Err(ConfigError::Invalid(format!(
            "{key}: a webhook secret is written whsec_ followed by base64 (e.g. whsec_ and the \
             output of `openssl rand -base64 32`)"
        )));
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| {
            ConfigError::Invalid(format!("{key}: the part after whsec_ is not base64 ({e})"))
        })?;
    if bytes.len() < 24 || bytes.len() > 64 {
        return Err(ConfigError::Invalid(format!(
            "{key}: the secret decodes to {} bytes; it must be 24 to 64 (e.g. whsec_ and the \
             output of `openssl rand -base64 32`)",
            bytes.len()
        )));
    }
    Ok(bytes)
}

#[cfg(test)]
#[path = "webhooks_tests.rs"]
mod tests;
