//! The configuration as a whole: the example, precedence, paths, validation.

use super::env;
use super::rebase::program_next_to;
use super::*;
use std::path::{Path, PathBuf};

#[test]
fn the_example_config_parses_and_matches_the_defaults() {
    let example: Config = toml::from_str(EXAMPLE).expect("example config parses");
    example.validate().unwrap();
    // Every field, nested ones included (`Debug` shows them all; secrets are unset).
    assert_eq!(format!("{example:#?}"), format!("{:#?}", Config::default()));
}

#[test]
fn the_example_file_is_the_generated_reference() {
    assert!(
        EXAMPLE == reference(),
        "config/callbackd.example.toml is not what `callbackd print-config` prints; \
         regenerate it: cargo run -q -- print-config > config/callbackd.example.toml"
    );
}

#[test]
fn the_reference_lists_keys_in_the_order_their_struct_declares_them() {
    let text = reference();
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("{needle} missing from the reference"))
    };
    // Sections as `Config` lists them, keys as their struct does (not alphabetically).
    assert!(at("[server]") < at("[auth]") && at("[auth]") < at("[store]"));
    assert!(at("\nlisten = ") < at("\nallow_remote = "));
    assert!(at("\nallow_remote = ") < at("\nmax_body_bytes = 33554432"));
    assert!(at("\nbackend = ") < at("# path = ") && at("# path = ") < at("\nsync = "));
}

#[test]
fn the_reference_shows_every_key_of_every_section() {
    let text = reference();
    for key in [
        "[api]",
        "keepalive_ms = 15000",
        "# token_file = ",
        "[bridge]",
        "# default_cwd = ",
        "[retention]",
        "interval = \"1h\"",
        "[store]",
        "# path = ",
        "# [[namespaces]]",
        "# [namespaces.quotas]",
        "# [namespaces.bridge]",
        "# [[tools.command]]",
        "# [tools.limits.NAME]",
        "# approval = ",
        "[metrics]",
        "[log]",
        "[server]",
    ] {
        assert!(text.contains(key), "{key} missing from the reference");
    }
    // Every key and table line, commented out or not, is valid TOML with the right types.
    let is_key =
        |l: &str| l.starts_with('[') || l.split_once(" = ").is_some_and(|(k, _)| !k.contains(' '));
    let uncommented: String = text
        .lines()
        .map(|l| l.strip_prefix("# ").filter(|r| is_key(r)).unwrap_or(l))
        .map(|l| format!("{l}\n"))
        .collect();
    let all: Config = toml::from_str(&uncommented).expect("the uncommented reference parses");
    assert_eq!(all.tools.command[0].name, "word_count");
    assert_eq!(all.namespaces.len(), 1);
}

#[test]
fn tool_limits_parse_from_toml_and_zero_is_refused() {
    let config: Config =
        toml::from_str("[tools.limits.memory]\ntimeout_ms = 5000\nmax_concurrency = 2\n").unwrap();
    let memory = &config.tools.limits["memory"];
    assert_eq!(
        (memory.timeout_ms, memory.max_concurrency),
        (Some(5000), Some(2))
    );
    let zero: Config = toml::from_str("[tools.limits.echo]\nmax_concurrency = 0\n").unwrap();
    let err = zero.validate().unwrap_err().to_string();
    assert!(err.contains("tools.limits.echo"), "{err}");
    assert!(toml::from_str::<Config>("[tools.limits.echo]\ntimeout = 1\n").is_err());
}

#[test]
fn a_command_tools_relative_program_is_next_to_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(
        &path,
        "[[tools.command]]\nname = \"a\"\nargv = [\"./bin/a.sh\", \"./arg\"]\ncwd = \"work\"\n\
         [[tools.command]]\nname = \"b\"\nargv = [\"python3\"]\n",
    )
    .unwrap();
    let config = Config::from_file(&path).unwrap();
    let [a, b] = &config.tools.command[..] else {
        panic!("two tools")
    };
    assert_eq!(Path::new(&a.argv[0]), dir.path().join("./bin/a.sh"));
    assert!(Path::new(&a.argv[0]).is_absolute());
    assert_eq!(a.argv[1], "./arg", "arguments are the program's business");
    assert_eq!(a.cwd.as_deref(), Some(dir.path().join("work").as_path()));
    assert_eq!(b.argv, ["python3"]);
}

#[test]
fn a_relative_program_of_a_config_in_the_working_directory_is_made_absolute() {
    let cwd = std::env::current_dir().unwrap();
    assert_eq!(
        program_next_to(Path::new(""), "./bin/x").map(PathBuf::from),
        Some(cwd.join("bin/x"))
    );
    assert_eq!(
        program_next_to(Path::new("/etc/callbackd"), "tools/x"),
        Some("/etc/callbackd/tools/x".into())
    );
    assert_eq!(program_next_to(Path::new("/etc"), "python3"), None);
    assert_eq!(program_next_to(Path::new("/etc"), "/usr/bin/x"), None);
}

#[test]
fn unknown_keys_are_rejected() {
    let err = toml::from_str::<Config>("[server]\nlisten_on = \"x\"\n").unwrap_err();
    assert!(err.to_string().contains("listen_on"));
}

#[test]
fn environment_overrides_the_file_and_defaults() {
    let mut config: Config =
        toml::from_str("[server]\nlisten = \"127.0.0.1:1\"\n[store]\npath = \"file.db\"\n")
            .unwrap();
    assert_eq!(config.store.path, PathBuf::from("file.db"));
    config
        .apply_env(|k| match k {
            env::LISTEN => Some("127.0.0.1:2".into()),
            env::STORE_TOKEN => Some("from-env".into()),
            _ => None,
        })
        .unwrap();
    assert_eq!(config.server.listen, "127.0.0.1:2");
    assert_eq!(config.store.path, PathBuf::from("file.db"));
    assert_eq!(config.auth.store_token.unwrap().expose(), "from-env");
}

#[test]
fn non_loopback_listen_needs_allow_remote() {
    let mut config = Config::default();
    config.server.listen = "0.0.0.0:7420".into();
    assert!(config
        .validate()
        .unwrap_err()
        .to_string()
        .contains("allow_remote"));
    config.server.allow_remote = true;
    config.validate().unwrap();
}

#[test]
fn relative_paths_in_a_file_are_relative_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, "[store]\npath = \"data/x.db\"\n").unwrap();
    let config = Config::from_file(&path).unwrap();
    assert_eq!(config.store.path, dir.path().join("data/x.db"));
}
