//! `callbackd backup PATH`: a consistent copy of a live database, without stopping appends.
//!
//! The copy is made by the store (`VACUUM INTO`, see `store::sqlite::copy`) into a temporary
//! file next to `PATH`, created with mode 0600 (the copy holds the agents' blob encryption
//! keys), then fsynced, checked with `PRAGMA quick_check`, renamed over `PATH` and its
//! directory fsynced: `PATH` is either absent, the old file, or a complete, checked copy.
//!
//! `--namespace N` narrows the copy to one namespace: before the fsync, every row of the
//! other namespaces is deleted from the temporary copy (from every table: each has an `ns`
//! column) and the copy is `VACUUM`ed, so that the file holds nothing of theirs, not even in
//! free pages. Without it, the backup is the whole database, every namespace.

use std::fs::OpenOptions;
use std::io::ErrorKind;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::store::sqlite::copy::{self, NarrowError, Narrowed};
use crate::store::sqlite::files;
use crate::store::Namespace;
use crate::transfer::progress::{mib, Progress};

/// Why a backup failed. Nothing is left at `PATH` by a failed backup (the old file, if
/// any, stays as it was).
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("database {0} does not exist")]
    NoDatabase(PathBuf),
    #[error("{0} already exists; pass --force to replace it")]
    Exists(PathBuf),
    #[error("{0} is the database itself; back it up to another path")]
    SameFile(PathBuf),
    #[error("the directory of {0} does not exist")]
    NoDirectory(PathBuf),
    #[error("cannot write {path}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("copying {db}")]
    Copy {
        db: PathBuf,
        source: rusqlite::Error,
    },
    #[error("keeping only namespace {ns} in the copy")]
    Narrow { ns: String, source: NarrowError },
    #[error("the copy failed its quick_check, so it was discarded: {}", .0.join("; "))]
    Check(Vec<String>),
}

/// Where a running backup is, for a progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Copying: bytes written so far, and about how many there will be.
    Copying { done: u64, total: u64 },
    /// `--namespace`: the other namespaces' rows are deleted from the copy, which is vacuumed.
    Narrowing,
    /// The copy is written; fsync and `quick_check` run.
    Checking,
}

/// What a finished backup wrote.
#[derive(Debug, Clone)]
pub struct BackupReport {
    pub bytes: u64,
    pub elapsed: Duration,
    /// With a namespace: the rows kept (all of it) and how many of other namespaces went.
    pub narrowed: Option<Narrowed>,
}

/// Copies the database at `db` to `dest`: all of it, or with `ns` only that namespace's rows
/// (a namespace with none gives a valid, empty copy). An existing `dest` is refused unless
/// `force`. `progress` is told where the backup is, every 50 ms while the copy runs.
pub fn backup(
    db: &Path,
    dest: &Path,
    force: bool,
    ns: Option<&Namespace>,
    mut progress: impl FnMut(Step),
) -> Result<BackupReport, BackupError> {
    let started = Instant::now();
    if !db.is_file() {
        return Err(BackupError::NoDatabase(db.to_path_buf()));
    }
    if same_file(db, dest) {
        return Err(BackupError::SameFile(dest.to_path_buf()));
    }
    if !force && dest.symlink_metadata().is_ok() {
        return Err(BackupError::Exists(dest.to_path_buf()));
    }
    let dir = match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(BackupError::NoDirectory(dest.to_path_buf()));
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| BackupError::Io { path, source }
    };
    let tmp = Temp(temp_path(dest).map_err(io(dest))?);
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp.0)
        .map_err(io(&tmp.0))?;

    let expected = copy::estimated_copy_bytes(db).map_err(|source| BackupError::Copy {
        db: db.to_path_buf(),
        source,
    })?;
    let copied = std::thread::scope(|s| {
        let worker = s.spawn(|| copy::vacuum_into(db, &tmp.0));
        while !worker.is_finished() {
            progress(Step::Copying {
                done: std::fs::metadata(&tmp.0).map_or(0, |m| m.len()),
                total: expected,
            });
            std::thread::sleep(Duration::from_millis(50));
        }
        worker.join().expect("the copy thread does not panic")
    });
    copied.map_err(|source| BackupError::Copy {
        db: db.to_path_buf(),
        source,
    })?;
    let narrowed = match ns {
        Some(ns) => {
            progress(Step::Narrowing);
            let kept = copy::keep_only_namespace(&tmp.0, ns.as_str()).map_err(|source| {
                BackupError::Narrow {
                    ns: ns.as_str().to_string(),
                    source,
                }
            })?;
            Some(kept)
        }
        None => None,
    };
    progress(Step::Checking);
    let file = std::fs::File::open(&tmp.0).map_err(io(&tmp.0))?;
    file.sync_all().map_err(io(&tmp.0))?;
    let bytes = file.metadata().map_err(io(&tmp.0))?.len();
    drop(file);
    let problems = copy::quick_check(&tmp.0).map_err(|source| BackupError::Copy {
        db: tmp.0.clone(),
        source,
    })?;
    if !problems.is_empty() {
        return Err(BackupError::Check(problems));
    }
    // A -wal left beside an old file at `dest` would be replayed into the new copy when it is
    // opened, and corrupt it.
    for stale in [files::wal_path(dest), files::shm_path(dest)] {
        match std::fs::remove_file(&stale) {
            Err(e) if e.kind() != ErrorKind::NotFound => return Err(io(&stale)(e)),
            _ => {}
        }
    }
    std::fs::rename(&tmp.0, dest).map_err(io(dest))?;
    std::mem::forget(tmp);
    std::fs::File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(io(&dir))?;
    Ok(BackupReport {
        bytes,
        elapsed: started.elapsed(),
        narrowed,
    })
}

/// `callbackd backup`: [`backup`] with a progress line on a terminal and a summary.
/// With `ns`, the summary says how many rows of it were kept, by table.
pub fn command(db: &Path, dest: &Path, force: bool, ns: Option<&Namespace>) -> anyhow::Result<()> {
    let mut line = Progress::new("backup");
    let report = backup(db, dest, force, ns, |step| match step {
        Step::Copying { done, total } => line.update(done, total),
        Step::Narrowing => line.step("deleting the other namespaces' rows from the copy"),
        Step::Checking => line.step("checking the copy (fsync, quick_check)"),
    })?;
    let what = match (ns, &report.narrowed) {
        (Some(ns), Some(n)) => {
            let tables: Vec<String> = n.kept.iter().map(|(t, k)| format!("{t} {k}")).collect();
            format!(
                "namespace {} only: {} rows kept ({}), {} rows of other namespaces left out; ",
                ns.as_str(),
                n.kept_rows(),
                tables.join(", "),
                n.removed
            )
        }
        _ => String::new(),
    };
    line.finish(&format!(
        "{what}{} written to {} in {:.1} s (quick_check ok)",
        mib(report.bytes),
        dest.display(),
        report.elapsed.as_secs_f64()
    ));
    Ok(())
}

/// `.<name>.backup-<random>.tmp` next to `dest`.
fn temp_path(dest: &Path) -> std::io::Result<PathBuf> {
    let mut bytes = [0u8; 6];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    let suffix: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let name = dest
        .file_name()
        .map_or_else(|| "backup".into(), |n| n.to_string_lossy().into_owned());
    Ok(dest.with_file_name(format!(".{name}.backup-{suffix}.tmp")))
}

fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// The temporary file, removed unless the backup got as far as renaming it.
struct Temp(PathBuf);

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::{SqliteOptions, SqliteStore};

    fn store_in(dir: &Path) -> PathBuf {
        let db = dir.join("live.db");
        drop(SqliteStore::open(&SqliteOptions::new(&db)).unwrap());
        db
    }

    #[test]
    fn refuses_an_existing_path_unless_forced_and_never_the_database_itself() {
        let dir = tempfile::tempdir().unwrap();
        let db = store_in(dir.path());
        let dest = dir.path().join("copy.db");
        std::fs::write(&dest, "old").unwrap();
        std::fs::write(files::wal_path(&dest), "stale wal").unwrap();
        let err = backup(&db, &dest, false, None, |_| {}).unwrap_err();
        assert!(err.to_string().contains("--force"), "{err}");
        assert_eq!(std::fs::read(&dest).unwrap(), b"old");
        let mut steps = Vec::new();
        backup(&db, &dest, true, None, |s| steps.push(s)).unwrap();
        assert_eq!(steps.last(), Some(&Step::Checking), "{steps:?}");
        assert!(copy::quick_check(&dest).unwrap().is_empty());
        assert!(
            !files::wal_path(&dest).exists(),
            "the stale WAL was removed"
        );
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&dest).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let err = backup(&db, &db, true, None, |_| {}).unwrap_err();
        assert!(matches!(err, BackupError::SameFile(_)), "{err}");
        let err = backup(&dir.path().join("nope.db"), &dest, true, None, |_| {}).unwrap_err();
        assert!(matches!(err, BackupError::NoDatabase(_)), "{err}");
        let err = backup(&db, &dir.path().join("no/dir/x.db"), false, None, |_| {}).unwrap_err();
        assert!(matches!(err, BackupError::NoDirectory(_)), "{err}");
        // No temporary file is left behind.
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}
