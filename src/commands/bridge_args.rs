//! `callbackd bridge-args`: the flags that point a bridge at this daemon, with the tokens the
//! running daemon uses (never new ones), and its URL as the client commands find it (the
//! runtime file of a running daemon, else the configured listen address).

use callbackd::bridge::{self, BridgeArgs};
use callbackd::cli::{ArgsFormat, ConfigArgs};
use callbackd::store::Namespace;
use callbackd::tokens;

use super::load;

pub fn run(args: &ConfigArgs, format: ArgsFormat, namespace: &Namespace) -> anyhow::Result<()> {
    let config = load(args)?;
    // Where the daemon listens as the client commands find it: a `callbackd run` on an
    // automatic port through its runtime file.
    let url = callbackd::client::discover::locate(args, &config, namespace)?.url;
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
