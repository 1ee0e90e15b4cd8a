//! Relative paths in a config file are relative to the file, not to the working directory.

use std::path::{Path, PathBuf};

use super::Config;

impl Config {
    /// Makes the relative paths of a config file relative to `dir`, the file's directory
    /// (`""` when that is the working directory, which leaves them as they are).
    pub(super) fn rebase(&mut self, dir: &Path) {
        let fix = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = dir.join(&*p);
            }
        };
        fix(&mut self.store.path);
        for p in [
            &mut self.auth.store_token_file,
            &mut self.auth.tool_token_file,
            &mut self.api.token_file,
            &mut self.api.read_token_file,
            &mut self.bridge.token_file,
            &mut self.metrics.token_file,
        ]
        .into_iter()
        .flatten()
        {
            fix(p);
        }
        for p in self.telemetry.headers_file.values_mut() {
            fix(p);
        }
        for ns in &mut self.namespaces {
            ns.rebase(&fix);
        }
        for hook in &mut self.webhooks {
            hook.rebase(&fix);
        }
        for tool in &mut self.tools.command {
            if let Some(p) = tool.cwd.as_mut() {
                fix(p);
            }
            // A program given as a relative path ("./tools/wc.sh", "bin/x") is the file next
            // to the config too, made absolute: left relative, exec would look for it in the
            // tool's `cwd`. A bare name ("python3") is looked up in PATH as usual.
            if let Some(program) = tool.argv.first_mut() {
                if let Some(absolute) = program_next_to(dir, program) {
                    *program = absolute;
                }
            }
        }
    }
}

/// A command tool's program given as a relative path, made absolute against `dir` (the
/// config file's directory, `""` for the working directory); `None` for a bare name, left to
/// PATH, or an absolute path.
pub(super) fn program_next_to(dir: &Path, program: &str) -> Option<String> {
    let path = Path::new(program);
    if !program.contains('/') || path.is_absolute() {
        return None;
    }
    let joined = dir.join(path);
    let absolute = std::path::absolute(&joined).unwrap_or(joined);
    Some(absolute.to_string_lossy().into_owned())
}
