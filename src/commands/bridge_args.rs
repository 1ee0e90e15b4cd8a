//! `callbackd bridge-args`: the flags that point a bridge at this daemon, with the tokens the
//! running daemon uses (never new ones).

use callbackd::bridge::{self, BridgeArgs};
use callbackd::cli::{ArgsFormat, ConfigArgs};
use callbackd::store::Namespace;
use callbackd::tokens;

use super::load;

pub fn run(config: &ConfigArgs, format: ArgsFormat, namespace: &Namespace) -> anyhow::Result<()> {
    let config = load(config)?;
    let addr = config.server.listen_addr()?;
    anyhow::ensure!(
        addr.port() != 0,
        "bridge-args needs a fixed port, but server.listen is {addr}; \
         use `callbackd run -- <bridge>` to pick a free port automatically"
    );
    let url = callbackd::app::base_url(addr);
    let named = callbackd::namespaces::table::bridge_tokens(&config, namespace, &|k| {
        std::env::var(k).ok()
    })?;
    let args = match named {
        Some((store_token, tool_token)) => BridgeArgs {
            url,
            store_token,
            tool_token,
        },
        None => {
            // Never generated here: new tokens would be ones the running daemon rejects.
            let tokens = tokens::find(&config.auth, &config.api, &config.store.path)?;
            BridgeArgs::new(&url, &tokens)
        }
    };
    print!(
        "{}",
        match format {
            ArgsFormat::Argv => format!("{}\n", bridge::shell_join(&args.argv())),
            ArgsFormat::Env => args.env_lines(),
            ArgsFormat::Json => format!("{}\n", args.json()),
        }
    );
    Ok(())
}
