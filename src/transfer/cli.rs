//! The command-line arguments of `backup`, `export` and `import`.

use std::path::PathBuf;

use clap::Args;

use crate::cli::ConfigArgs;
use crate::store::Namespace;

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
    #[arg(long, value_name = "NAME", value_parser = parse_namespace)]
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
    #[arg(long, value_name = "NAME", default_value = "default", value_parser = parse_namespace)]
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
    #[arg(long, value_name = "NAME", default_value = "default", value_parser = parse_namespace)]
    pub namespace: Namespace,
    /// A bridge JSONL store directory (its `rootDir`).
    pub dir: PathBuf,
}

/// A namespace name as the command line and the configuration accept it: 1 to 63 of `a-z`,
/// `0-9`, `-` and `_`, starting with a letter or a digit.
pub fn parse_namespace(name: &str) -> Result<Namespace, String> {
    Namespace::parse(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_names_follow_the_rule() {
        for good in ["default", "a", "0", "alice-2", "team_x", &"a".repeat(63)] {
            assert_eq!(parse_namespace(good).unwrap().as_str(), good);
        }
        for (bad, why) in [
            ("", "empty"),
            (&"a".repeat(64) as &str, "64 characters"),
            ("-a", "starts with '-'"),
            ("_a", "starts with '_'"),
            ("Alice", "starts with 'A'"),
            ("al ice", "contains ' '"),
            ("a/b", "contains '/'"),
            ("ns.1", "contains '.'"),
            ("é", "starts with 'é'"),
            ("aé", "contains 'é'"),
        ] {
            let err = parse_namespace(bad).unwrap_err();
            assert!(
                err.contains(why) && err.contains("1 to 63"),
                "{bad:?}: {err}"
            );
        }
    }
}
