//! Where the database and the generated tokens live when neither `--db`, `CALLBACKD_DB` nor
//! `store.path` says: the user's data directory, `$XDG_DATA_HOME/callbackd`, else
//! `~/.local/share/callbackd`.
//!
//! Never the working directory: `callbackd run` is typically started from the agent's
//! workspace, where the model-driven agent reads and writes files, and a tokens file there is
//! one `cat` away from a prompt-injected request (and one `git add .` away from a commit).
//! One fixed place also means every command (`serve`, `run`, `bridge-args`, ...) finds the same
//! tokens file from any directory.
//!
//! The directory is created (mode 0700: it holds the tokens) only by the commands that create
//! the database, `serve` and `run` ([`create_private`]); the others only look.

use std::ffi::OsString;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// The directory's name under the data home.
pub const APP_DIR: &str = "callbackd";

/// The database's file name in it; the tokens file is `callbackd.tokens` next to it.
pub const DB_FILE: &str = "callbackd.db";

/// The default data directory, from the process's environment; `None` if neither
/// `XDG_DATA_HOME` nor `HOME` is set to an absolute path.
pub fn default_dir() -> Option<PathBuf> {
    dir_from(|name| std::env::var_os(name))
}

/// The default database path, or an empty path when there is no data directory (which
/// `Config::validate` then reports).
pub fn default_db() -> PathBuf {
    default_dir().map_or_else(PathBuf::new, |d| d.join(DB_FILE))
}

/// [`default_dir`] with the environment given: `XDG_DATA_HOME` wins if it is absolute (the
/// XDG spec says a relative one is to be ignored), then `$HOME/.local/share`.
pub fn dir_from(get: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let absolute = |name: &str| get(name).map(PathBuf::from).filter(|p| p.is_absolute());
    let data_home =
        absolute("XDG_DATA_HOME").or_else(|| absolute("HOME").map(|h| h.join(".local/share")))?;
    Some(data_home.join(APP_DIR))
}

/// Creates the directory the database `db` is in, if it is missing, with mode 0700 for each
/// directory created (it will hold the tokens file). An existing directory is left as it is.
pub fn create_private(db: &Path) -> io::Result<()> {
    let Some(dir) = db.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Ok(());
    };
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn xdg_data_home_wins_then_home() {
        let both = [("XDG_DATA_HOME", "/x/data"), ("HOME", "/home/u")];
        assert_eq!(
            dir_from(env(&both)),
            Some(PathBuf::from("/x/data/callbackd"))
        );
        let home = [("HOME", "/home/u")];
        assert_eq!(
            dir_from(env(&home)),
            Some(PathBuf::from("/home/u/.local/share/callbackd"))
        );
    }

    #[test]
    fn relative_or_missing_variables_are_ignored() {
        let relative = [("XDG_DATA_HOME", "data"), ("HOME", "/home/u")];
        assert_eq!(
            dir_from(env(&relative)),
            Some(PathBuf::from("/home/u/.local/share/callbackd"))
        );
        assert_eq!(dir_from(env(&[("XDG_DATA_HOME", "")])), None);
        assert_eq!(dir_from(env(&[])), None);
    }

    #[test]
    fn created_directories_are_private_and_existing_ones_untouched() {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("a/callbackd/callbackd.db");
        create_private(&db).unwrap();
        for dir in [tmp.path().join("a"), tmp.path().join("a/callbackd")] {
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{}", dir.display());
        }
        let open = tmp.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        create_private(&open.join("x.db")).unwrap();
        let mode = std::fs::metadata(&open).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
        create_private(Path::new("x.db")).unwrap();
    }
}
