"""Issue 4, end to end: `callbackd run -- <bridge>` wires the real bridge to callbackd (callback
flags on argv, never in the environment), relays its ready line, forwards SIGTERM, and agent
work survives stopping and starting it again.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import harness as h
FINISHED = "RUN_LIFECYCLE_STATUS_FINISHED"
# callbackd's built-in echo tool, declared by hand here (test_tools_e2e covers `tools export`)
ECHO_DECL = {"echo": {"description": "Echo the arguments back", "inputSchema": {"type": "object"}}}


def check_bridge_wiring(run: h.CallbackdRun, store_token: str, tool_token: str):
    pid = run.bridge_pid
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    argv = [a.decode() for a in argv]
    for flag in ("--store-callback-url", "--store-callback-auth-token", "--tool-callback-url",
                 "--tool-callback-auth-token", "--local-store"):
        assert flag in argv, f"{flag} missing from the bridge's argv: {argv}"
    assert json.loads(argv[argv.index("--local-store") + 1]) == {"type": "custom"}
    assert argv[argv.index("--store-callback-auth-token") + 1] == store_token
    assert argv[argv.index("--tool-callback-auth-token") + 1] == tool_token
    environ = Path(f"/proc/{pid}/environ").read_bytes()
    assert store_token.encode() not in environ and tool_token.encode() not in environ, \
        "callback tokens must not be in the bridge's environment (its shell tools inherit it)"
    assert b"CURSOR_SDK_STORE_CALLBACK" not in environ and b"CURSOR_SDK_TOOL_CALLBACK" not in environ


def stop_run(run: h.CallbackdRun, timeout: float = 30) -> int:
    """SIGTERM to callbackd only (not its group): it must forward it to the bridge and exit."""
    os.kill(run.proc.pid, signal.SIGTERM)
    rc = run.proc.popen.wait(timeout=timeout)
    deadline = time.monotonic() + 5
    while h.pid_alive(run.bridge_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not h.pid_alive(run.bridge_pid), "the bridge outlived `callbackd run`"
    return rc


def test_run_wires_bridge_and_survives_restart(setup_env, tmp_path):
    decls = ECHO_DECL
    backend = h.FakeBackend(setup_env, tmp_path, "auto")
    ws = tmp_path / "ws"
    db_path = tmp_path / "data" / "callbackd.db"
    db_path.parent.mkdir(parents=True)
    store_token, tool_token = h.rand_token(), h.rand_token()

    run = h.CallbackdRun(setup_env, tmp_path, ws, backend, db_path, store_token, tool_token)
    # the ready line is relayed unchanged, and written to --ready-file with mode 0600
    assert json.loads(run.ready_file.read_text()) == run.ready
    assert stat.S_IMODE(run.ready_file.stat().st_mode) == 0o600
    check_bridge_wiring(run, store_token, tool_token)

    c = run.client
    agent = c.create_agent(ws, name="runner", custom_tools=decls)
    _, r1 = c.send(agent, "Say hello, then call the echo tool.")
    assert r1["status"] == FINISHED, r1
    _, r2 = c.send(agent, "Now call the echo tool again.")
    assert r2["status"] == FINISHED, r2
    with h.DB(db_path) as db:
        doc = db.agent_doc(agent)
        runs = db.run_docs(agent)
        root = doc["latestCheckpoint"]["rootBlobId"]
        assert root in db.blob_ids(agent)
        assert runs[-1]["latestCheckpointRef"]["rootBlobId"] == root
        assert runs[-1]["startCheckpointRef"]["rootBlobId"] == runs[0]["latestCheckpointRef"]["rootBlobId"]
    c.call("GetRun", {"runId": r1["runId"]})
    observed = c.observe(r1["runId"])
    assert stop_run(run) == 0, run.proc.tail()

    # start it again on the same database: resume, replay turn 1, continue with turn 3
    run = h.CallbackdRun(setup_env, tmp_path, ws, backend, db_path, store_token, tool_token)
    c = run.client
    assert c.resume_agent(agent, ws, custom_tools=decls)["agentId"] == agent
    c.call("GetRun", {"runId": r1["runId"]})
    assert c.observe(r1["runId"]) == observed
    _, r3 = c.send(agent, "Third turn: call the echo tool.")
    assert r3["status"] == FINISHED, r3
    assert [r["runId"] for r in c.call("ListRuns", {"agentId": agent})["items"]] == [r1["runId"], r2["runId"], r3["runId"]]
    scripts = [r for r in backend.records() if r.get("ev") == "script"]
    assert [s["priorTurns"] for s in scripts] == [0, 1, 2], scripts
    assert stop_run(run) == 0, run.proc.tail()
    # last, as it needs callbackd's echo tool: the three tool calls reached it through `run`'s wiring
    results = backend.mcp_results()
    assert len(results) == 3 and all("success" in r for r in results), results


def test_run_refuses_user_supplied_callback_flags(setup_env, tmp_path):
    backend = h.FakeBackend(setup_env, tmp_path, "auto")
    run = h.CallbackdRun(setup_env, tmp_path, tmp_path / "ws", backend, tmp_path / "callbackd.db", h.rand_token(),
                         h.rand_token(), bridge_args=["--store-callback-url", "http://127.0.0.1:9/",
                                                      "--store-callback-auth-token", "x"], wait_ready=False)
    rc = run.proc.popen.wait(timeout=30)
    err = run.proc.stderr_text()
    assert rc != 0 and "cursor-sdk-bridge ready" not in err, err
    assert "store-callback" in err, f"the error should name the conflicting flag: {err}"


def test_run_does_not_spawn_bridge_when_daemon_cannot_start(setup_env, tmp_path):
    backend = h.FakeBackend(setup_env, tmp_path, "auto")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        run = h.CallbackdRun(setup_env, tmp_path, tmp_path / "ws", backend, tmp_path / "callbackd.db", h.rand_token(),
                             h.rand_token(), listen=f"127.0.0.1:{port}", wait_ready=False)
        rc = run.proc.popen.wait(timeout=30)
    err = run.proc.stderr_text()
    assert rc != 0, err
    # a spawned bridge would have printed its ready line and written its token under TMPDIR
    assert "cursor-sdk-bridge ready" not in err and not list((tmp_path / "tmp").glob("cursor-sdk-bridge-*")), err
    assert not h.live_pids_mentioning(str(tmp_path / "run-state")), "a bridge was spawned"
    assert f"cannot listen on 127.0.0.1:{port}" in err, f"the error should say why: {err}"


def test_python_sdk_attaches_to_callbackd_run(setup_env, tmp_path):
    """docs/bridge.md's "Using callbackd with the Python SDK" snippet, executed as is.
    Note: the SDK only accepts custom tools that carry a Python `execute` handler, and in
    attach mode it then points the bridge's tool callback at its own server (SetToolCallback),
    so callbackd's tools are declared with a raw CreateAgent, not through this client."""
    backend = h.FakeBackend(setup_env, tmp_path, "text")
    ws = tmp_path / "ws"
    db_path = tmp_path / "callbackd.db"
    run = h.CallbackdRun(setup_env, tmp_path, ws, backend, db_path, h.rand_token(), h.rand_token())
    snippet = h.HERE / "snippets" / "python_sdk_attach.py"
    res = subprocess.run([sys.executable, str(snippet)], cwd=ws, timeout=120,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                         env={**os.environ, "CALLBACKD_READY_FILE": str(run.ready_file), "CURSOR_API_KEY": "dummy"})
    assert res.returncode == 0, res.stderr.decode()[-3000:]
    agent_id, status, text = res.stdout.decode().strip().split(" ", 2)
    assert (status, text) == ("finished", "Hello from the fake model."), res.stdout
    with h.DB(db_path) as db:
        assert db.agent_doc(agent_id)["cwd"] == str(ws)
        assert [r["status"] for r in db.run_docs(agent_id)] == ["finished"]
    assert stop_run(run) == 0, run.proc.tail()


def test_memory_note_survives_restart(setup_env, tmp_path):
    """The built-in `memory` tool: a note written in turn 1 is read back in turn 3, after
    `callbackd run` was stopped and started again; DeleteAgent removes the agent's notes too."""
    decls = {"memory": {"description": "Per-agent notebook", "inputSchema": {"type": "object"}}}
    backend = h.FakeBackend(setup_env, tmp_path, "text")
    ws = tmp_path / "ws"
    db_path = tmp_path / "callbackd.db"
    tokens = h.rand_token(), h.rand_token()
    note = "ship v1 on Friday ✓"

    run = h.CallbackdRun(setup_env, tmp_path, ws, backend, db_path, *tokens)
    c = run.client
    agent = c.create_agent(ws, name="remembers", custom_tools=decls)
    backend.post_script({"steps": [{"text": "Saving a note."},
                                   {"tool": "memory", "args": {"action": "set", "key": "plan", "value": note}},
                                   {"textFromLastTool": "saved: "}]})
    _, r1 = c.send(agent, "Remember the plan.")
    assert r1["status"] == FINISHED, r1
    _, r2 = c.send(agent, "Just chat.")
    assert r2["status"] == FINISHED, r2
    assert stop_run(run) == 0, run.proc.tail()

    run = h.CallbackdRun(setup_env, tmp_path, ws, backend, db_path, *tokens)
    c = run.client
    assert c.resume_agent(agent, ws, custom_tools=decls)["agentId"] == agent
    backend.post_script({"steps": [{"tool": "memory", "args": {"action": "get", "key": "plan"}},
                                   {"textFromLastTool": "note: "}]})
    _, r3 = c.send(agent, "What was the plan?")
    assert r3["status"] == FINISHED, r3
    results = backend.mcp_results()
    assert len(results) == 2 and all("success" in r for r in results), results
    got = results[1]["success"]["structuredContent"]
    assert got.get("found") is True and got.get("value") == note, got
    assert note in r3["result"]["result"]

    run_ids = [r["runId"] for r in (r1, r2, r3)]
    with h.DB(db_path) as db:
        assert db.count("memory_notes", "agent_id = ?", (agent,)) == 1
    c.call("DeleteAgent", {"agentId": agent})
    with h.DB(db_path) as db:
        assert db.rows_for_agent(agent, run_ids) == {}, "rows of the deleted agent are left (memory notes included)"
    assert stop_run(run) == 0, run.proc.tail()


def test_a_sigkilled_callbackd_run_takes_the_real_bridge_along(setup_env, tmp_path):
    """callbackd cannot forward anything once SIGKILLed: its watchdog stops the bridge."""
    backend = h.FakeBackend(setup_env, tmp_path, "auto")
    run = h.CallbackdRun(setup_env, tmp_path, tmp_path / "ws", backend, tmp_path / "callbackd.db", h.rand_token(),
                         h.rand_token())
    os.kill(run.proc.pid, signal.SIGKILL)
    run.proc.popen.wait(timeout=10)
    deadline = time.monotonic() + 20
    while h.pid_alive(run.bridge_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not h.pid_alive(run.bridge_pid), f"the bridge outlived a SIGKILLed callbackd\n{run.proc.tail()}"
    assert "callbackd watchdog: callbackd ended without stopping the bridge" in run.proc.stderr_text()
    deadline = time.monotonic() + 5
    while h.live_pids_mentioning(str(tmp_path / "run-state")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not h.live_pids_mentioning(str(tmp_path / "run-state")), "part of the bridge is still running"
