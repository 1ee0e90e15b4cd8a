//! [`CommandTool`]: a tool declared in `[[tools.command]]` that runs a program.
//!
//! One call, one process: `argv` is executed directly (no shell, so nothing in the
//! arguments or the config is interpolated), in `cwd`, with the daemon's environment minus
//! every `CALLBACKD_*` variable (those may hold the bearer tokens) plus the configured `env`
//! plus `CALLBACKD_TOOL_NAME`, `CALLBACKD_AGENT_ID` and, when known, `CALLBACKD_TOOL_CALL_ID`.
//! The arguments are written to stdin as one line of JSON, then stdin is closed.
//!
//! The result is stdout: a JSON object is passed through, anything else is returned as text.
//! A non-zero exit (or death by a signal) is an error result carrying the tail of stderr.
//!
//! The program runs in a process group of its own. When the call ends — finished, timed
//! out, or dropped because the bridge hung up — the whole group is sent SIGKILL, so helper
//! processes it started go too (`kill_on_drop` alone would only reach the direct child).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::{BoxFuture, Tool, ToolContext, ToolError};
use crate::config::CommandToolConfig;

/// Default bound on a command's stdout; more is an error (and the process is killed).
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 4 * 1024 * 1024;
/// How much of stderr an error result carries (the end of it, where the error usually is).
const STDERR_TAIL_BYTES: usize = 2048;

/// A tool that runs a program.
#[derive(Debug, Clone)]
pub struct CommandTool {
    name: String,
    description: String,
    input_schema: Value,
    output_schema: Option<Value>,
    argv: Vec<String>,
    cwd: Option<PathBuf>,
    env: BTreeMap<String, String>,
    timeout: Option<Duration>,
    max_concurrency: Option<usize>,
    max_output_bytes: usize,
}

impl CommandTool {
    /// From a `[[tools.command]]` block; the error says what is wrong with it.
    pub fn from_config(c: &CommandToolConfig) -> Result<CommandTool, String> {
        if c.argv.is_empty() || c.argv[0].is_empty() {
            return Err("argv must name a program: argv = [\"program\", \"arg\", ...]".into());
        }
        let input_schema = match &c.input_schema {
            Some(v) => schema_value(v).map_err(|e| format!("input_schema: {e}"))?,
            None => serde_json::json!({ "type": "object" }),
        };
        let output_schema = c
            .output_schema
            .as_ref()
            .map(schema_value)
            .transpose()
            .map_err(|e| format!("output_schema: {e}"))?;
        if c.timeout_ms == Some(0) {
            return Err("timeout_ms must be at least 1".into());
        }
        Ok(CommandTool {
            name: c.name.clone(),
            description: c.description.clone(),
            input_schema,
            output_schema,
            argv: c.argv.clone(),
            cwd: c.cwd.clone(),
            env: c.env.clone(),
            timeout: c.timeout_ms.map(Duration::from_millis),
            max_concurrency: c.max_concurrency,
            max_output_bytes: c.max_output_bytes.unwrap_or(DEFAULT_MAX_OUTPUT_BYTES),
        })
    }

    async fn run(&self, args: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        let program = &self.argv[0];
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(&self.argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("CALLBACKD_") {
                cmd.env_remove(key);
            }
        }
        cmd.envs(&self.env)
            .env("CALLBACKD_TOOL_NAME", &self.name)
            .env("CALLBACKD_AGENT_ID", &ctx.agent_id);
        if let Some(id) = &ctx.tool_call_id {
            cmd.env("CALLBACKD_TOOL_CALL_ID", id);
        }
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
        let mut child = cmd.spawn().map_err(|e| {
            tracing::warn!(target: "callbackd::tools", tool = %self.name, %program, error = %e,
                "cannot start command");
            ToolError::failed(format!(
                "tool {:?} could not start its program: {e}",
                self.name
            ))
        })?;
        // Declared after `child`, so dropped before it: the group is killed first.
        let group = ProcessGroup::of(child.id());

        let input = {
            let mut bytes = serde_json::to_vec(&args).expect("JSON values serialise");
            bytes.push(b'\n');
            bytes
        };
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let write = async {
            if let Some(mut stdin) = stdin {
                // A program that ignores its input may exit before reading it: not an error.
                let _ = stdin.write_all(&input).await;
                let _ = stdin.shutdown().await;
            }
        };
        let read_out = async {
            let out = match stdout {
                Some(s) => read_capped(s, self.max_output_bytes).await,
                None => Ok(Vec::new()),
            };
            if out.is_err() {
                group.kill(); // stop a runaway writer now rather than at the timeout
            }
            out
        };
        let read_err = async {
            match stderr {
                Some(s) => read_tail(s, STDERR_TAIL_BYTES).await,
                None => Vec::new(),
            }
        };
        let wait = async {
            let status = child.wait().await;
            // The program is done; helpers it left behind would keep the pipes open.
            group.kill_after_exit();
            status
        };
        let ((), out, err, status) = tokio::join!(write, read_out, read_err, wait);

        let status = status.map_err(|e| {
            ToolError::failed(format!(
                "tool {:?}: waiting for its program failed: {e}",
                self.name
            ))
        })?;
        let out = out.map_err(|e| ToolError::failed(format!("tool {:?}: {e}", self.name)))?;
        if !status.success() {
            return Err(ToolError::failed(failure_message(&self.name, status, &err)));
        }
        Ok(parse_stdout(&out))
    }
}

impl Tool for CommandTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        self.input_schema.clone()
    }

    fn output_schema(&self) -> Option<Value> {
        self.output_schema.clone()
    }

    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    fn max_concurrency(&self) -> Option<usize> {
        self.max_concurrency
    }

    fn call(&self, args: Value, ctx: ToolContext) -> BoxFuture<'_, Result<Value, ToolError>> {
        Box::pin(self.run(args, ctx))
    }
}

/// A schema from the config: a TOML table, or a string of JSON.
fn schema_value(v: &toml::Value) -> Result<Value, String> {
    match v {
        toml::Value::String(json) => {
            serde_json::from_str(json).map_err(|e| format!("not valid JSON: {e}"))
        }
        toml::Value::Table(_) => serde_json::to_value(v).map_err(|e| e.to_string()),
        _ => Err("must be a table or a JSON string".into()),
    }
}

/// stdout as a result: a JSON object as is, anything else as text (trailing newline off).
fn parse_stdout(out: &[u8]) -> Value {
    let text = String::from_utf8_lossy(out);
    match serde_json::from_str::<Value>(text.trim()) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::String(text.trim_end_matches(['\n', '\r']).to_string()),
    }
}

fn failure_message(tool: &str, status: ExitStatus, stderr: &[u8]) -> String {
    use std::os::unix::process::ExitStatusExt;
    let how = match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => format!("was killed by signal {sig}"),
        _ => "failed".to_string(),
    };
    let tail = String::from_utf8_lossy(stderr);
    let tail = tail.trim();
    if tail.is_empty() {
        format!("tool {tool:?}: the program {how} (no stderr output)")
    } else {
        format!("tool {tool:?}: the program {how}: {tail}")
    }
}

/// Reads to the end, failing once more than `max` bytes arrive.
async fn read_capped(mut r: impl AsyncRead + Unpin, max: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = r
            .read(&mut buf)
            .await
            .map_err(|e| format!("reading the program's output failed: {e}"))?;
        if n == 0 {
            return Ok(out);
        }
        if out.len() + n > max {
            return Err(format!(
                "the program wrote more than {max} bytes to stdout (max_output_bytes) and was \
                 stopped"
            ));
        }
        out.extend_from_slice(&buf[..n]);
    }
}

/// Reads to the end, keeping only the last `keep` bytes (cut at a UTF-8 boundary).
async fn read_tail(mut r: impl AsyncRead + Unpin, keep: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    let mut cut = false;
    while let Ok(n) = r.read(&mut buf).await {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if out.len() > 2 * keep {
            out.drain(..out.len() - keep);
            cut = true;
        }
    }
    if out.len() > keep {
        out.drain(..out.len() - keep);
        cut = true;
    }
    if cut {
        // Skip continuation bytes so the tail starts on a character.
        let start = out
            .iter()
            .position(|b| (b & 0xC0) != 0x80)
            .unwrap_or(out.len());
        out.drain(..start);
    }
    out
}

/// The process group of a spawned command; SIGKILLed on drop unless it was already killed
/// after the program exited.
struct ProcessGroup {
    pgid: Option<nix::unistd::Pid>,
    done: AtomicBool,
}

impl ProcessGroup {
    fn of(pid: Option<u32>) -> Self {
        ProcessGroup {
            pgid: pid
                .and_then(|p| i32::try_from(p).ok())
                // Never 0 or negative: killpg(0) would signal callbackd's own group.
                .filter(|p| *p > 0)
                .map(nix::unistd::Pid::from_raw),
            done: AtomicBool::new(false),
        }
    }

    fn kill(&self) {
        if let Some(pgid) = self.pgid {
            // ESRCH (nobody left in the group) is the common, harmless case.
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        }
    }

    /// Kills what is left of the group once the program has exited, and only once: after
    /// that the group id could in time be reused by an unrelated process.
    fn kill_after_exit(&self) {
        if !self.done.swap(true, Ordering::SeqCst) {
            self.kill();
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if !self.done.load(Ordering::SeqCst) {
            self.kill();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdout_is_an_object_or_text() {
        assert_eq!(parse_stdout(b"{\"a\":1}\n"), serde_json::json!({"a": 1}));
        assert_eq!(parse_stdout(b"hello\n"), Value::String("hello".into()));
        assert_eq!(parse_stdout(b"[1,2]\n"), Value::String("[1,2]".into()));
        assert_eq!(parse_stdout(b""), Value::String(String::new()));
    }

    #[tokio::test]
    async fn stderr_tail_keeps_the_end_on_a_character_boundary() {
        let data = "é".repeat(3000); // 6000 bytes
        let tail = read_tail(data.as_bytes(), 2047).await;
        let text = String::from_utf8(tail).expect("valid UTF-8");
        assert!(text.chars().all(|c| c == 'é'));
        assert!(text.len() <= 2047 && text.len() >= 2040);
    }

    #[test]
    fn the_commented_example_block_is_a_valid_command_tool() {
        let block: String = crate::config::EXAMPLE
            .lines()
            .skip_while(|l| *l != "# [[tools.command]]")
            .take_while(|l| l.starts_with('#'))
            .map(|l| format!("{}\n", l.trim_start_matches('#').trim_start()))
            .collect();
        assert!(block.contains("argv"), "example block not found");
        let config: crate::config::Config = toml::from_str(&block).unwrap();
        let tool = CommandTool::from_config(&config.tools.command[0]).unwrap();
        assert_eq!(tool.name(), "word_count");
        assert_eq!(tool.timeout(), Some(Duration::from_secs(5)));
    }

    #[test]
    fn toml_and_json_schemas_are_accepted() {
        let t: toml::Value = toml::from_str("type = \"object\"\nrequired = [\"a\"]").unwrap();
        assert_eq!(
            schema_value(&t).unwrap(),
            serde_json::json!({"type": "object", "required": ["a"]})
        );
        let s = toml::Value::String("{\"type\":\"object\"}".into());
        assert_eq!(
            schema_value(&s).unwrap(),
            serde_json::json!({"type": "object"})
        );
        assert!(schema_value(&toml::Value::Integer(1)).is_err());
    }
}
