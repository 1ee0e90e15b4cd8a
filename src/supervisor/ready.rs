//! The bridge's ready line (`cursor-sdk-bridge ready {json}` on its stderr), the ready file
//! `--ready-file` writes from it, and the bridge's own auth token file it names.

use std::ffi::{OsStr, OsString};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::SupervisorError;

/// The prefix of the bridge's ready line on stderr; the rest of the line is JSON.
pub const READY_PREFIX: &str = "cursor-sdk-bridge ready ";

/// Removes a stale ready file and checks that the new one can be written where asked.
pub(super) fn prepare_ready_file(path: &Path) -> Result<(), SupervisorError> {
    let fail = |reason: String| SupervisorError::ReadyFile {
        path: path.to_path_buf(),
        reason,
    };
    let dir = ready_dir(path);
    if !dir.is_dir() {
        return Err(fail(format!("directory {} does not exist", dir.display())));
    }
    if path.is_dir() {
        return Err(fail("is a directory".into()));
    }
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(fail(format!("cannot remove the old file: {e}"))),
    }
}

fn ready_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Writes `json` to `path`, mode 0600, through a temporary file in the same directory and a
/// rename, so a reader never sees a partial file.
pub fn write_ready_file(path: &Path, json: &str) -> io::Result<()> {
    let name = path.file_name().unwrap_or_else(|| OsStr::new("ready"));
    let mut tmp_name = OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = ready_dir(path).join(tmp_name);
    let _ = std::fs::remove_file(&tmp);
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(json.as_bytes())?;
        file.write_all(b"\n")?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// The bridge's `authTokenFile` from its ready JSON, if it has the shape the bridge makes
/// (`<tmp>/cursor-sdk-bridge-XXXXXX/auth-token`); nothing else is ever removed.
pub(super) fn auth_token_file(ready_json: &str) -> Option<PathBuf> {
    let ready: serde_json::Value = serde_json::from_str(ready_json).ok()?;
    let path = PathBuf::from(ready.get("authTokenFile")?.as_str()?);
    let dir_name = path.parent()?.file_name()?.to_str()?;
    (path.is_absolute()
        && path.file_name()? == "auth-token"
        && dir_name.starts_with("cursor-sdk-bridge-"))
    .then_some(path)
}

/// The JSON of a ready line, if `line` is one and its JSON parses.
pub(super) fn ready_json(line: &[u8]) -> Option<&str> {
    let rest = line.strip_prefix(READY_PREFIX.as_bytes())?;
    let json = std::str::from_utf8(rest)
        .ok()?
        .trim_end_matches(['\r', '\n']);
    match serde_json::from_str::<serde_json::Value>(json) {
        Ok(v) if v.is_object() => Some(json),
        _ => {
            tracing::warn!("the bridge's ready line does not carry a JSON object");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_lines_are_recognised_only_with_a_json_object() {
        assert_eq!(
            ready_json(b"cursor-sdk-bridge ready {\"url\":\"u\"}\n"),
            Some("{\"url\":\"u\"}")
        );
        assert_eq!(ready_json(b"cursor-sdk-bridge ready nope\n"), None);
        assert_eq!(ready_json(b"cursor-sdk-bridge SIGTERM received\n"), None);
    }

    #[test]
    fn only_the_bridges_own_token_file_is_cleaned_up() {
        let ok = r#"{"authTokenFile":"/tmp/cursor-sdk-bridge-Ab12/auth-token"}"#;
        assert_eq!(
            auth_token_file(ok),
            Some(PathBuf::from("/tmp/cursor-sdk-bridge-Ab12/auth-token"))
        );
        for bad in [
            r#"{"authTokenFile":"/home/me/.ssh/id_ed25519"}"#,
            r#"{"authTokenFile":"/tmp/cursor-sdk-bridge-x/other"}"#,
            r#"{"authTokenFile":"cursor-sdk-bridge-x/auth-token"}"#,
            r#"{}"#,
        ] {
            assert_eq!(auth_token_file(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_ready_file_is_private_and_replaced_whole() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ready.json");
        std::fs::write(&path, "old").unwrap();
        write_ready_file(&path, "{\"a\":1}").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
