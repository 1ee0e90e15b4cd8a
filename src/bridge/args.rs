//! The flags that point the Cursor SDK bridge at this daemon (`callbackd bridge-args`,
//! `callbackd run`).
//!
//! Argv is the safe way to hand them over: the bridge's model-driven shell tools inherit its
//! environment, so tokens in the environment are readable by any command an agent runs;
//! its argv is not passed on.

use crate::secret::Secret;
use crate::tokens::Tokens;

/// `--local-store` value that routes all agent state to the store callback.
pub const LOCAL_STORE_CUSTOM: &str = r#"{"type":"custom"}"#;

/// The bridge settings for one daemon.
#[derive(Debug, Clone)]
pub struct BridgeArgs {
    pub url: String,
    pub store_token: Secret,
    pub tool_token: Secret,
}

impl BridgeArgs {
    pub fn new(base_url: &str, tokens: &Tokens) -> Self {
        BridgeArgs {
            url: base_url.to_string(),
            store_token: tokens.store.clone(),
            tool_token: tokens.tool.clone(),
        }
    }

    /// The flags, one argument per element.
    pub fn argv(&self) -> Vec<String> {
        vec![
            "--local-store".into(),
            LOCAL_STORE_CUSTOM.into(),
            "--store-callback-url".into(),
            self.url.clone(),
            "--store-callback-auth-token".into(),
            self.store_token.expose().into(),
            "--tool-callback-url".into(),
            self.url.clone(),
            "--tool-callback-auth-token".into(),
            self.tool_token.expose().into(),
        ]
    }

    /// `export NAME=value` lines for the bridge's environment variables.
    pub fn env_lines(&self) -> String {
        [
            ("CURSOR_SDK_LOCAL_STORE", LOCAL_STORE_CUSTOM),
            ("CURSOR_SDK_STORE_CALLBACK_URL", &self.url),
            (
                "CURSOR_SDK_STORE_CALLBACK_AUTH_TOKEN",
                self.store_token.expose(),
            ),
            ("CURSOR_SDK_TOOL_CALLBACK_URL", &self.url),
            (
                "CURSOR_SDK_TOOL_CALLBACK_AUTH_TOKEN",
                self.tool_token.expose(),
            ),
        ]
        .iter()
        .map(|(k, v)| format!("export {k}={}\n", shell_quote(v)))
        .collect()
    }

    /// The settings as a JSON object.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "localStore": LOCAL_STORE_CUSTOM,
            "storeCallbackUrl": self.url,
            "storeCallbackAuthToken": self.store_token.expose(),
            "toolCallbackUrl": self.url,
            "toolCallbackAuthToken": self.tool_token.expose(),
        })
    }
}

/// Quotes one word for a POSIX shell, leaving plain words as they are.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./:=@%+,".contains(&b));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Quotes and joins words into one shell command line.
pub fn shell_join(words: &[String]) -> String {
    words
        .iter()
        .map(|w| shell_quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_quotes_the_local_store_json_for_a_shell() {
        let tokens = Tokens {
            store: Secret::new("s1".into()),
            tool: Secret::new("t1".into()),
            api: Secret::new("a1".into()),
            api_read: None,
        };
        let args = BridgeArgs::new("http://127.0.0.1:7420/", &tokens);
        assert_eq!(
            shell_join(&args.argv()),
            "--local-store '{\"type\":\"custom\"}' --store-callback-url http://127.0.0.1:7420/ \
             --store-callback-auth-token s1 --tool-callback-url http://127.0.0.1:7420/ \
             --tool-callback-auth-token t1"
        );
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(args.json()["toolCallbackAuthToken"], "t1");
    }
}
