//! `callbackd check-config`: the configuration, checked as at startup, without starting.

use callbackd::cli::ConfigArgs;
use callbackd::config::ConfigError;
use callbackd::{tokens, App};

use super::{as_toml, load};

pub fn run(args: &ConfigArgs) -> anyhow::Result<()> {
    let config = load(args)?;
    let auth = &config.auth;
    let explicit = (auth.store_token.is_some() || auth.store_token_file.is_some())
        && (auth.tool_token.is_some() || auth.tool_token_file.is_some())
        && (config.api.token.is_some() || config.api.token_file.is_some());
    let tokens = match tokens::find(auth, &config.api, &config.store.path) {
        Ok(_) if explicit => "set in the config or environment".to_string(),
        Ok(_) => format!("{}", tokens::generated_path(&config.store.path).display()),
        Err(ConfigError::NoTokens { path }) => {
            format!(
                "{} (not yet written: serve/run generate it)",
                path.display()
            )
        }
        Err(e) => return Err(e.into()),
    };
    // The webhooks' secrets, from their values, files or environment variables.
    let webhooks = config.webhook_keys()?.len();
    // Tool names, schemas and command blocks are checked when the registry is built.
    let tools = App::builder(config.clone()).tool_declarations()?;
    // The namespaces' tokens, names, quotas and allowlists, checked as at startup.
    let named = config
        .namespaces
        .iter()
        .filter(|n| n.name != "default")
        .count();
    if !config.namespaces.is_empty() {
        let table = callbackd::namespaces::Table::without_default_tokens(&config)?;
        let served: Vec<String> = tools
            .as_object()
            .map(|t| t.keys().cloned().collect())
            .unwrap_or_default();
        table.check_tools(&|n| served.iter().any(|s| s == n))?;
    }
    println!(
        "config ok: listen {}, {}, sync {}, max body {} bytes, tools {}, namespaces {}, \
         webhooks {webhooks}, tokens {tokens}",
        as_toml(&config.server.listen),
        config.store.backend().describe(),
        as_toml(&config.store.sync),
        config.server.max_body_bytes,
        tools.as_object().map_or(0, |t| t.len()),
        1 + named
    );
    Ok(())
}
