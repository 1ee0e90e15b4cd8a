//! The `callbackd` binary: parse the command line, load the configuration, run a command.

use anyhow::Context;
use clap::Parser;

use callbackd::bridge::{self, BridgeArgs};
use callbackd::cli::{ArgsFormat, Cli, Command, ConfigArgs, ToolsCommand};
use callbackd::config::{Config, ConfigError, EXAMPLE};
use callbackd::{telemetry, tokens, App};

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    callbackd::closed_stdout::install_panic_hook();
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) if callbackd::closed_stdout::is_closed_stdout(&e) => {
            std::process::ExitCode::from(callbackd::closed_stdout::EXIT_STATUS)
        }
        Err(e) => {
            // `callbackd run`: the bridge's own stderr already said why it stopped.
            if let Some(exit) = e.downcast_ref::<callbackd::supervisor::BridgeExit>() {
                return std::process::ExitCode::from(exit.exit_code());
            }
            if let Some(failed) = e.downcast_ref::<callbackd::supervisor::NotReady>() {
                telemetry::stderr_line(format_args!("callbackd: error: {failed}"));
                return std::process::ExitCode::from(failed.exit_code());
            }
            let e = callbackd::error_chain::Chain(&e);
            telemetry::stderr_line(format_args!("callbackd: error: {e}"));
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command.unwrap_or(Command::Serve(cli.serve)) {
        Command::Serve(args) => serve(&args),
        Command::Run(args) => run_bridge(args),
        Command::BridgeArgs {
            config,
            format,
            namespace,
        } => {
            let config = load(&config)?;
            let addr = config.server.listen_addr()?;
            anyhow::ensure!(
                addr.port() != 0,
                "bridge-args needs a fixed port, but server.listen is {addr}; \
                 use `callbackd run -- <bridge>` to pick a free port automatically"
            );
            let url = callbackd::app::base_url(addr);
            let named = callbackd::namespaces::table::bridge_tokens(&config, &namespace, &|k| {
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
        Command::CheckConfig(args) => {
            let config = load(&args)?;
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
                 tokens {tokens}",
                as_toml(&config.server.listen),
                config.store.backend().describe(),
                as_toml(&config.store.sync),
                config.server.max_body_bytes,
                tools.as_object().map_or(0, |t| t.len()),
                1 + named
            );
            Ok(())
        }
        Command::Check(args) => {
            let config = load(&args)?;
            let backend = config.store.backend();
            let report = block_on(backend.check())??;
            println!(
                "{} (schema version {})",
                backend.describe(),
                report.schema_version
            );
            for line in &report.integrity_errors {
                println!("integrity: {line}");
            }
            for (ns, agent, blob) in &report.corrupt_blobs {
                println!("corrupt checkpoint blob {blob} of agent {agent} (namespace {ns}): checksum mismatch");
            }
            println!(
                "integrity_check: {}; checkpoint blobs: {} checked, {} corrupt",
                if report.integrity_errors.is_empty() {
                    "ok"
                } else {
                    "FAILED"
                },
                report.blobs_checked,
                report.corrupt_blobs.len()
            );
            anyhow::ensure!(report.is_ok(), "the database has problems (see above)");
            Ok(())
        }
        Command::Migrate(args) => {
            let config = load(&args)?;
            let backend = config.store.backend();
            let version = block_on(backend.migrate())?
                .with_context(|| format!("migrating {}", backend.describe()))?;
            println!("{} is at schema version {version}", backend.describe());
            Ok(())
        }
        Command::Prune {
            config,
            older_than,
            dry_run,
            yes,
        } => callbackd::prune::command(
            &load(&config)?,
            &callbackd::prune::PruneOptions {
                older_than,
                dry_run,
                yes,
            },
        ),
        Command::Namespaces { config, json } => {
            let config = load(&config)?;
            let backend = config.store.backend();
            if let Some(path) = backend.sqlite_path() {
                anyhow::ensure!(path.exists(), "database {} does not exist", path.display());
            }
            // Tokens are not needed to read usage.
            let table = callbackd::namespaces::Table::without_default_tokens(&config)?;
            let rows = block_on(async {
                let store = backend
                    .open()
                    .await
                    .with_context(|| format!("opening {}", backend.describe()))?;
                let records = store.run_records();
                anyhow::Ok(callbackd::namespaces::usage::rows(&*records, &table).await?)
            })??;
            if json {
                for row in &rows {
                    println!("{}", serde_json::to_string(row)?);
                }
            } else {
                print!("{}", callbackd::namespaces::usage::render(&rows));
                if let Some(path) = backend.sqlite_path() {
                    let bytes = callbackd::prune::database_bytes(path);
                    println!("database {}: {bytes} bytes (file and WAL)", path.display());
                }
            }
            Ok(())
        }
        Command::Backup(args) => {
            let config = load(&args.config)?;
            sqlite_only(&config, "backup")?;
            callbackd::transfer::backup::command(
                &config.store.path,
                &args.path,
                args.force,
                args.namespace.as_ref(),
            )
        }
        Command::Export(args) => {
            let config = load(&args.config)?;
            block_on(callbackd::transfer::jsonl_export::command(
                &config.store.backend(),
                &args.namespace,
                &args.dir,
            ))?
        }
        Command::Import(args) => {
            let config = load(&args.config)?;
            sqlite_only(&config, "import")?;
            callbackd::transfer::jsonl_import::command(
                &config.store.sqlite_options(),
                &args.namespace,
                &args.dir,
                args.replace,
            )
        }
        Command::CopyStore(args) => block_on(copy_store(args))?,
        Command::PrintConfig => {
            print!("{EXAMPLE}");
            Ok(())
        }
        Command::Healthcheck(args) => {
            let config = load(&args)?;
            let addr = config.server.listen_addr()?;
            callbackd::health::probe(addr, std::time::Duration::from_secs(3))
                .map_err(|e| anyhow::anyhow!("unhealthy: {e}"))?;
            // One line, so a person running it by hand sees it worked (exit 0 alone says so
            // to a container runtime).
            println!("healthy: {addr} answered /healthz");
            Ok(())
        }
        Command::Watchdog {
            pgid,
            stop_timeout_ms,
        } => callbackd::supervisor::watchdog::watch(
            pgid,
            std::time::Duration::from_millis(stop_timeout_ms),
        ),
        Command::Follow(args) => callbackd::client::commands::follow_command(&args),
        Command::Sessions(args) => callbackd::client::commands::sessions_command(&args),
        Command::Runs(args) => callbackd::client::commands::runs_command(&args),
        Command::Approvals(args) => callbackd::client::commands::approvals_command(&args),
        Command::Approve(args) => callbackd::client::commands::decide_command(&args, true),
        Command::Deny(args) => callbackd::client::commands::decide_command(&args, false),
        Command::Completions { shell } => Ok(callbackd::manual::completions(
            shell,
            &mut std::io::stdout().lock(),
        )?),
        Command::Man => Ok(callbackd::manual::man_page(&mut std::io::stdout().lock())?),
        Command::Tools {
            command: ToolsCommand::Export(args),
        } => {
            let config = load(&args)?;
            let declarations = App::builder(config).tool_declarations()?;
            println!("{}", serde_json::to_string_pretty(&declarations)?);
            Ok(())
        }
    }
}

/// `backup` and `import` work on a SQLite file; on PostgreSQL they would silently read or
/// write a file nobody uses. (`export` reads either backend.)
fn sqlite_only(config: &Config, command: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        config.store.backend().sqlite_path().is_some(),
        "`callbackd {command}` works on a SQLite database, and the store is {}; use \
         PostgreSQL's own tools (pg_dump) or `callbackd copy-store` to a SQLite file",
        config.store.backend().describe()
    );
    Ok(())
}

/// `callbackd copy-store`: see `store::transfer`.
async fn copy_store(args: callbackd::cli::CopyStoreArgs) -> anyhow::Result<()> {
    use callbackd::store::{backend, transfer};
    let mut from = backend::transfer_side(&args.from, args.from_schema, false).await?;
    let mut to = backend::transfer_side(&args.to, args.to_schema, true).await?;
    let report = transfer::copy_store(from.as_mut(), to.as_mut(), args.batch).await?;
    let rows: Vec<String> = report
        .rows
        .iter()
        .map(|(t, n)| format!("{n} {t}"))
        .collect();
    println!(
        "copied {} from {} to {}: {}; counts match, {} checkpoint blobs verified",
        if rows.is_empty() {
            "nothing".to_string()
        } else {
            "everything".to_string()
        },
        from.describe(),
        to.describe(),
        rows.join(", "),
        report.blobs_verified
    );
    Ok(())
}

/// Runs a store command's future on a runtime of its own.
fn block_on<T>(fut: impl std::future::Future<Output = T>) -> anyhow::Result<T> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    Ok(runtime.block_on(fut))
}

/// A config value the way it is written in TOML (`"normal"`, not Rust's `Normal`).
fn as_toml(value: &impl serde::Serialize) -> String {
    toml::Value::try_from(value).map_or_else(|e| format!("<{e}>"), |v| v.to_string())
}

/// Configuration from file and environment, with the command-line overrides, validated.
fn load(args: &ConfigArgs) -> anyhow::Result<Config> {
    let mut config = Config::load(args.config.as_deref())?;
    if let Some(listen) = &args.listen {
        config.server.listen = listen.clone();
    }
    if let Some(db) = &args.db {
        config.store.set_location(&db.to_string_lossy());
    }
    config.validate()?;
    Ok(config)
}

/// A reload reads the configuration as `load` does now, from the same file and flags.
fn reload_source(args: &ConfigArgs) -> callbackd::namespaces::reload::ReloadSource {
    let args = args.clone();
    callbackd::namespaces::reload::ReloadSource {
        file: args.config.clone(),
        load: std::sync::Arc::new(move || load(&args)),
    }
}

fn serve(args: &ConfigArgs) -> anyhow::Result<()> {
    let config = load(args)?;
    telemetry::init(&config.log);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let source = reload_source(args);
    runtime.block_on(async move {
        let app = App::builder(config).reload_from(source).build().await?;
        let _runtime_file = callbackd::ready_line::announce(&app, &Default::default());
        app.run_until(callbackd::shutdown::signal()).await
    })
}

/// `callbackd run -- <bridge>`: see the `supervisor` module.
fn run_bridge(args: callbackd::cli::RunArgs) -> anyhow::Result<()> {
    use callbackd::supervisor::{self, BridgeCommand, RunOptions};
    // Refused before anything starts: the bridge command must not carry our flags.
    let bridge = BridgeCommand::new(args.bridge)?;
    let mut config = load(&args.config)?;
    if !supervisor::user_chose_listen(args.config.config.as_deref(), args.config.listen.as_deref())
    {
        config.server.listen = supervisor::FREE_PORT_LISTEN.into();
    }
    telemetry::init(&config.log);
    let source = reload_source(&args.config);
    let opts = RunOptions {
        namespace: args.namespace,
        ready_file: args.ready_file,
        stop_timeout: std::time::Duration::from_secs(args.stop_timeout),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let exit = runtime.block_on(supervisor::run(
        App::builder(config).reload_from(source),
        bridge,
        opts,
    ))?;
    Ok(exit.into_result()?)
}
