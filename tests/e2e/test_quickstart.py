"""The README's quick start, executed as written: tests/e2e/snippets/quickstart.sh is the README's
bash block character for character, and here it runs under bash in a fresh, empty HOME against
the fake Cursor backend (CURSOR_BACKEND_URL, which the bridge reads).

What is not the user's: the toolchain (CARGO_HOME and RUSTUP_HOME stay where they are, so
`cargo install` finds the crates already downloaded), CARGO_TARGET_DIR (the checkout's target/,
so `cargo install` reuses the release build scripts/test made once instead of building it
again), CARGO_INSTALL_ROOT (the fresh HOME's .cargo, which is what rustup puts on PATH) and pip's
download cache. Everything the quick start writes goes to the fresh HOME."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import harness as h

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = h.HERE / "snippets" / "quickstart.sh"


def test_readme_quick_start_is_the_tested_script():
    readme = (ROOT / "README.md").read_text()
    assert "```bash\n" + SCRIPT.read_text() + "```" in readme
    # it comes first: the README's first code block
    assert readme.index("```bash\n" + SCRIPT.read_text()) == readme.index("```")


def real_home_dir(var: str, default: str) -> str:
    return os.environ.get(var) or str(Path.home() / default)


def pip_cache_dir() -> str:
    out = subprocess.run([os.environ.get("E2E_PYTHON", "python3"), "-m", "pip", "cache", "dir"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return out.stdout.strip() or str(Path.home() / ".cache" / "pip")


def stop_group(pgid: int) -> None:
    """SIGTERM to the script's process group (callbackd stops its bridge), SIGKILL after 10 s."""
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


def test_quick_start_runs_as_written(setup_env, tmp_path):
    backend = h.FakeBackend(setup_env, tmp_path, "text")
    home = tmp_path / "home"
    home.mkdir()
    install_bin = home / ".cargo" / "bin"
    env = {
        "HOME": str(home),
        "PATH": f"{install_bin}:{os.environ['PATH']}",
        "CARGO_HOME": real_home_dir("CARGO_HOME", ".cargo"),
        "RUSTUP_HOME": real_home_dir("RUSTUP_HOME", ".rustup"),
        "CARGO_TARGET_DIR": os.environ.get("CARGO_TARGET_DIR", str(ROOT / "target")),
        "CARGO_INSTALL_ROOT": str(home / ".cargo"),
        "PIP_CACHE_DIR": pip_cache_dir(),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "CURSOR_BACKEND_URL": backend.url,
        "CURSOR_API_KEY": "dummy",
        "TMPDIR": str(tmp_path),
        "LANG": "C.UTF-8",
    }
    proc = subprocess.Popen(["bash", "-euo", "pipefail", str(SCRIPT)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        stop_group(proc.pid)
        out, err = proc.communicate()
        raise AssertionError("the quick start did not finish: " + err.decode()[-3000:])
    finally:
        stop_group(proc.pid)    # a `callbackd run &` left behind by a failing step
    out, err = out.decode(), err.decode()
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out[-2000:]}\n{err[-4000:]}"

    lines = out.strip().splitlines()
    assert lines[0].startswith("callbackd "), out          # callbackd --version, found on PATH
    assert (install_bin / "callbackd").exists()
    # the turn's stream: run_started first, completed last, with the model's answer
    events = [json.loads(line[len("data: "):]) for line in lines if line.startswith("data: ")]
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "completed", out
    assert events[-1]["status"] == "finished" and events[-1]["output"] == "Hello from the fake model."
    agent_id = events[0]["session_id"]

    # the data is in the data directory, the agent's workspace has no tokens in it
    data = home / ".local" / "share" / "callbackd"
    assert (data / "callbackd.tokens").exists() and (data / "callbackd.db").exists()
    assert oct(data.stat().st_mode & 0o777) == "0o700"
    workspace = home / "agent-workspace"
    assert sorted(p.name for p in workspace.iterdir()) == [], "ready file removed, nothing else"
    db = sqlite3.connect(data / "callbackd.db")
    try:
        assert db.execute("select count(*) from agents where agent_id = ?", (agent_id,)).fetchone() == (1,)
    finally:
        db.close()
