//! The Python `jsonschema` oracle (oracle.py beside this file) as a child process that
//! answers one request per line.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value};

pub struct Oracle {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pub version: String,
}

/// Why there is no oracle, said so that whoever reads it knows what to install.
pub struct Missing(pub String);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The interpreter: `CALLBACKD_ORACLE_PYTHON`, else the e2e venv's (`E2E_PYTHON`, which
/// `scripts/test` exports, or `$CALLBACKD_E2E_DIR/venv`, or `target/e2e/venv`).
fn python() -> Result<PathBuf, Missing> {
    for var in ["CALLBACKD_ORACLE_PYTHON", "E2E_PYTHON"] {
        if let Some(p) = std::env::var_os(var).filter(|p| !p.is_empty()) {
            return Ok(PathBuf::from(p));
        }
    }
    let e2e = std::env::var_os("CALLBACKD_E2E_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/e2e"));
    let venv = e2e.join("venv/bin/python");
    if venv.exists() {
        return Ok(venv);
    }
    Err(Missing(format!(
        "no Python with jsonschema: set CALLBACKD_ORACLE_PYTHON, or run tests/e2e/setup.sh \
         (it creates {} with the pinned jsonschema)",
        venv.display()
    )))
}

impl Oracle {
    pub fn start() -> Result<Oracle, Missing> {
        let python = python()?;
        let script = repo().join("tests/schema_oracle/oracle.py");
        let mut child = Command::new(&python)
            .arg(&script)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| Missing(format!("cannot run {}: {e}", python.display())))?;
        let stdin = child.stdin.take().expect("piped stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut hello = String::new();
        stdout
            .read_line(&mut hello)
            .map_err(|e| Missing(format!("the oracle did not start: {e}")))?;
        let hello: Value = serde_json::from_str(&hello).unwrap_or(Value::Null);
        let Some(version) = hello["ready"].as_str() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Missing(format!(
                "{} has no usable jsonschema ({hello}); run tests/e2e/setup.sh",
                python.display()
            )));
        };
        Ok(Oracle {
            version: version.to_string(),
            child,
            stdin,
            stdout,
        })
    }

    /// The oracle's verdict on each instance (under draft 7 rather than 2020-12 if
    /// `draft7`), or why it could not judge.
    pub fn judge(
        &mut self,
        schema: &Value,
        draft7: bool,
        instances: &[Value],
    ) -> Result<Vec<bool>, String> {
        let draft = if draft7 { "7" } else { "2020-12" };
        let request = json!({"schema": schema, "draft": draft, "instances": instances});
        writeln!(self.stdin, "{request}").map_err(|e| format!("oracle gone: {e}"))?;
        self.stdin
            .flush()
            .map_err(|e| format!("oracle gone: {e}"))?;
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .map_err(|e| format!("oracle gone: {e}"))?;
        let answer: Value =
            serde_json::from_str(&line).map_err(|e| format!("oracle said {line:?}: {e}"))?;
        if let Some(list) = answer["valid"].as_array() {
            return Ok(list.iter().map(|v| v.as_bool() == Some(true)).collect());
        }
        Err(answer["error"].as_str().unwrap_or("no answer").to_string())
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
