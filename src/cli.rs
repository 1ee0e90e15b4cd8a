//! The command line (clap derive). `serve` is the default command.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::store::Namespace;

#[derive(Debug, Parser)]
#[command(
    name = "callbackd",
    version,
    about = "Store and custom-tool callback daemon for the Cursor SDK bridge"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Options of the default `serve` command.
    #[command(flatten)]
    pub serve: ConfigArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon (the default).
    Serve(ConfigArgs),
    /// Run the daemon with the bridge as its child: the callback flags go on the bridge's
    /// argv, its stderr is relayed, signals are forwarded, and callbackd exits with its status.
    Run(RunArgs),
    /// Print the flags that point the bridge at this daemon (found as `healthcheck` finds it).
    BridgeArgs {
        #[command(flatten)]
        config: ConfigArgs,
        #[arg(long, value_enum, default_value_t = ArgsFormat::Argv)]
        format: ArgsFormat,
        /// The namespace the bridge is for (`[[namespaces]]`; docs/namespaces.md).
        #[arg(long, value_name = "NAME", default_value = "default", value_parser = crate::store::Namespace::parse)]
        namespace: crate::store::Namespace,
    },
    /// Print each namespace's usage (agents, runs, events, stored bytes) against its quotas,
    /// read from the store.
    Namespaces {
        #[command(flatten)]
        config: ConfigArgs,
        /// One JSON object per namespace, one per line.
        #[arg(long)]
        json: bool,
    },
    /// Load and validate the configuration, print a summary, and exit.
    CheckConfig(ConfigArgs),
    /// Create or upgrade the database schema, and exit.
    Migrate(ConfigArgs),
    /// Verify the database offline: SQLite's integrity check and every checkpoint blob's
    /// checksum. Exits non-zero when anything is wrong.
    Check(ConfigArgs),
    /// Remove the events of terminal runs that ended longer ago than --older-than (default:
    /// `retention.events_max_age`), in small transactions; safe while the daemon runs.
    Prune {
        #[command(flatten)]
        config: ConfigArgs,
        /// Age past which a terminal run's events go: `30d`, `12h`, `90m`, `0s` (all).
        #[arg(long, value_name = "DURATION")]
        older_than: Option<String>,
        /// Say what would be removed (runs, events, bytes) and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Do not ask (on a terminal, prune shows what it would remove and asks first).
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Copy the live database to PATH (consistent, without stopping appends), and check the copy.
    Backup(BackupArgs),
    /// Write the store to DIR in the bridge's JSONL store layout (`--local-store '{"type":"jsonl"}'`).
    Export(ExportArgs),
    /// Read a bridge JSONL store directory into the database, in one transaction.
    Import(ImportArgs),
    /// Copy everything one store holds into another, empty one (SQLite file <-> PostgreSQL
    /// URL, or the same backend twice), in batches, then verify counts and blob checksums.
    CopyStore(CopyStoreArgs),
    /// Print the commented example configuration.
    PrintConfig,
    /// Ask the running daemon's /healthz (for container health checks); exit 0 if healthy.
    /// The daemon is the one --listen names, else the one the runtime file next to the
    /// database names (a `callbackd run` on a free port), else 127.0.0.1:7420.
    Healthcheck(ConfigArgs),
    /// Internal: started by `run` next to the bridge; stops the bridge's process group if
    /// callbackd ends without releasing it (see `supervisor::watchdog`).
    #[command(hide = true)]
    Watchdog {
        #[arg(long)]
        pgid: i32,
        #[arg(long)]
        stop_timeout_ms: u64,
    },
    /// Follow a run's events live until it ends, resuming after a dropped connection or a
    /// daemon restart (a client of the run API). Exits 0 when the run finished.
    Follow(FollowArgs),
    /// List sessions, newest first (a client of the run API).
    Sessions(SessionsArgs),
    /// List a session's runs, in turn order (a client of the run API).
    Runs(RunsArgs),
    /// List the tool calls waiting for a person's approval (a client of the run API).
    Approvals(ApprovalsArgs),
    /// Approve a held tool call: the tool runs.
    Approve(DecideArgs),
    /// List the recent webhook deliveries, newest first, with their attempts and last answer
    /// (a client of the run API; `[[webhooks]]`, docs/webhooks.md).
    Webhooks(WebhooksArgs),
    /// Deny a held tool call: the model gets an error result with the reason.
    Deny(DecideArgs),
    /// Answer a run's open question (the model's `ask_user`): the answer is the tool's
    /// result.
    Answer(AnswerArgs),
    /// Fork a finished run's session: a new session whose conversation is the one after the
    /// run (or before it, with --before), to try another way from there.
    Fork(ForkArgs),
    /// Custom tools (`tools export`).
    Tools {
        #[command(subcommand)]
        command: ToolsCommand,
    },
    /// Print the shell completion script: `callbackd completions bash > /etc/bash_completion.d/callbackd`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): `callbackd man > callbackd.1`.
    Man,
}

/// `callbackd run [OPTIONS] -- <bridge command> [ARGS...]`
#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Write the bridge's ready JSON here (mode 0600) once it is ready; removed on exit.
    #[arg(long, value_name = "PATH")]
    pub ready_file: Option<PathBuf>,
    /// The namespace whose tokens the bridge gets and whose run API drives it
    /// (`[[namespaces]]`; docs/namespaces.md).
    #[arg(long, value_name = "NAME", default_value = "default", value_parser = crate::store::Namespace::parse)]
    pub namespace: crate::store::Namespace,
    /// Seconds the bridge gets to exit after SIGINT/SIGTERM before its process group is killed.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub stop_timeout: u64,
    /// The bridge command and its arguments, after `--`. Without `--listen` (or a listen
    /// address in the config or environment), callbackd listens on a free loopback port.
    #[arg(last = true, required = true, value_name = "BRIDGE")]
    pub bridge: Vec<std::ffi::OsString>,
}

/// `callbackd copy-store --from <path or url> --to <url or path>`
#[derive(Debug, Args, Clone)]
pub struct CopyStoreArgs {
    /// The source: a SQLite database file or a postgres:// URL.
    #[arg(long, value_name = "PATH|URL")]
    pub from: String,
    /// The target, which must be empty (created and migrated if needed).
    #[arg(long, value_name = "URL|PATH")]
    pub to: String,
    /// PostgreSQL schema of the source (default: the server's).
    #[arg(long, value_name = "SCHEMA")]
    pub from_schema: Option<String>,
    /// PostgreSQL schema of the target (created if missing).
    #[arg(long, value_name = "SCHEMA")]
    pub to_schema: Option<String>,
    /// Rows per read and per write transaction.
    #[arg(long, default_value_t = 1000)]
    pub batch: usize,
}

/// Where the configuration comes from, with command-line overrides.
#[derive(Debug, Args, Clone, Default)]
pub struct ConfigArgs {
    /// TOML configuration file.
    #[arg(long, env = "CALLBACKD_CONFIG", global = true, hide_env_values = true)]
    pub config: Option<PathBuf>,
    /// Listen address, ADDR:PORT (overrides server.listen).
    #[arg(long, global = true)]
    pub listen: Option<String>,
    /// SQLite database file (overrides store.path), or a postgres:// URL (selects the
    /// PostgreSQL backend, overrides store.url).
    #[arg(long, global = true)]
    pub db: Option<PathBuf>,
}

impl ConfigArgs {
    /// The configuration from file and environment, with these overrides, validated: the one
    /// loader of every command, daemon and client alike, so `--db postgres://…` selects
    /// PostgreSQL everywhere (and leaves `store.path`, where the runtime and tokens files
    /// are, at its default).
    pub fn load(&self) -> anyhow::Result<crate::Config> {
        let mut config = crate::Config::load(self.config.as_deref())?;
        if let Some(listen) = &self.listen {
            config.server.listen = listen.clone();
        }
        if let Some(db) = &self.db {
            config.store.set_location(&db.to_string_lossy());
        }
        config.validate()?;
        Ok(config)
    }
}

/// Where a client command finds the run API, and how it prints.
#[derive(Debug, Args, Clone)]
pub struct ClientArgs {
    /// The daemon's URL (`url` of its ready line). Default: a listen address you chose
    /// (--listen, CALLBACKD_LISTEN, server.listen), else the runtime file a running daemon
    /// leaves next to the database (preferring one with a bridge), else 127.0.0.1:7420.
    // `hide_env_values`: clap would print `[env: CALLBACKD_URL=]` when it is unset.
    #[arg(
        long,
        env = "CALLBACKD_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    pub url: Option<String>,
    /// The API token. Default: `api_token` of the tokens file next to the database.
    #[arg(
        long,
        env = "CALLBACKD_API_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// Print the API's JSON, one object per line.
    #[arg(long)]
    pub json: bool,
    /// Without --token: use this namespace's `api_token` from the configuration
    /// (`[[namespaces]]`; docs/namespaces.md).
    #[arg(long, value_name = "NAME", value_parser = crate::store::Namespace::parse)]
    pub namespace: Option<crate::store::Namespace>,
    /// Where the default URL and the tokens file come from.
    #[command(flatten)]
    pub config: ConfigArgs,
}

/// `callbackd follow RUN_ID`
#[derive(Debug, Args, Clone)]
pub struct FollowArgs {
    /// The run to follow.
    pub run_id: String,
    /// Start after this event seq (default: from the run's first event).
    #[arg(long, value_name = "SEQ", default_value_t = 0)]
    pub after: u64,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `callbackd sessions`
#[derive(Debug, Args, Clone)]
pub struct SessionsArgs {
    /// Sessions per page.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub limit: u32,
    /// Start at this page cursor (printed when there are more).
    #[arg(long)]
    pub cursor: Option<String>,
    /// Every page, not just the first.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `callbackd approvals`
#[derive(Debug, Args, Clone)]
pub struct ApprovalsArgs {
    /// Every approval, decided ones too (default: the pending ones).
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `callbackd webhooks`
#[derive(Debug, Args, Clone)]
pub struct WebhooksArgs {
    /// Only deliveries in this state: pending, delivered, failed (default: all).
    #[arg(long)]
    pub state: Option<String>,
    /// At most this many (1 to 1000).
    #[arg(long, default_value_t = 50)]
    pub limit: u32,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `callbackd approve ID` / `callbackd deny ID --reason ...`
#[derive(Debug, Args, Clone)]
pub struct DecideArgs {
    /// The approval's id (`approval_required` in the stream, or `callbackd approvals`).
    pub approval_id: String,
    /// Why; a denial's reason is told to the model.
    #[arg(long)]
    pub reason: Option<String>,
    /// `approve` only: run the tool with these arguments instead of the model's (a JSON
    /// object, checked against the tool's input schema; a refused edit leaves the approval
    /// pending). The record keeps both.
    #[arg(long, value_name = "JSON")]
    pub args: Option<String>,
    /// `approve` only: confirm the approval of a tool marked `confirm = true`.
    #[arg(long)]
    pub yes: bool,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `callbackd answer RUN_ID QUESTION_ID TEXT`
#[derive(Debug, Args, Clone)]
pub struct AnswerArgs {
    /// The run that asks (`callbackd follow RUN_ID` shows its questions).
    pub run_id: String,
    /// The question's id (the `question` event's `id`, or `callbackd approvals`).
    pub question_id: String,
    /// The answer: one of the offered options, or your own words.
    pub text: String,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `callbackd fork RUN_ID [--before] [--name NAME]`
#[derive(Debug, Args, Clone)]
pub struct ForkArgs {
    /// The finished run to fork at (`callbackd runs SESSION_ID` lists them).
    pub run_id: String,
    /// Start from the conversation as the run found it, not as it left it.
    #[arg(long)]
    pub before: bool,
    /// The new session's name (default: the source's).
    #[arg(long)]
    pub name: Option<String>,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `callbackd runs SESSION_ID`
#[derive(Debug, Args, Clone)]
pub struct RunsArgs {
    /// The session (agent id) whose runs to list.
    pub session_id: String,
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ArgsFormat {
    /// Shell-quoted command-line flags, to append to the bridge's command.
    Argv,
    /// `export` lines of the bridge's environment variables.
    Env,
    /// A JSON object, for programs.
    Json,
}

/// `callbackd tools ...`
#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// Print the JSON an adapter puts in CreateAgent `options.local.customTools` (tool name ->
    /// description, inputSchema, outputSchema) for every enabled built-in and
    /// `[[tools.command]]` tool.
    Export(ConfigArgs),
}

// The arguments of `backup`, `export` and `import` (the `transfer` module).

/// `callbackd backup [--force] [--namespace NAME] PATH`
#[derive(Debug, Args, Clone)]
pub struct BackupArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Replace PATH if it exists.
    #[arg(long)]
    pub force: bool,
    /// Keep only this namespace's rows in the copy (agents, runs, events, checkpoints, memory
    /// notes, tool calls, approvals, ...). Without it the copy is the whole database: every
    /// namespace.
    #[arg(long, value_name = "NAME", value_parser = Namespace::parse)]
    pub namespace: Option<Namespace>,
    /// Where to write the copy (a new SQLite file).
    pub path: PathBuf,
}

/// `callbackd export [--namespace NAME] DIR`
#[derive(Debug, Args, Clone)]
pub struct ExportArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The namespace to export.
    #[arg(long, value_name = "NAME", default_value = "default", value_parser = Namespace::parse)]
    pub namespace: Namespace,
    /// A new or empty directory; gets agents.ndjson, runs.ndjson, run_events.ndjson and
    /// checkpoints.ndjson.
    pub dir: PathBuf,
}

/// `callbackd import [--replace] [--namespace NAME] DIR`
#[derive(Debug, Args, Clone)]
pub struct ImportArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Overwrite agents, runs (with their events) and checkpoint blobs that already exist
    /// in the namespace, instead of refusing the import.
    #[arg(long)]
    pub replace: bool,
    /// The namespace to import into; other namespaces are not touched.
    #[arg(long, value_name = "NAME", default_value = "default", value_parser = Namespace::parse)]
    pub namespace: Namespace,
    /// A bridge JSONL store directory (its `rootDir`).
    pub dir: PathBuf,
}
