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


def settle_new_turn(s: Stack, sid: str, held: str) -> str:
    """Sends a new message on the session and lets its held call through; the new run's id
    once it has finished."""
    c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": "deploy again"})
    assert r.status == 200, r.read()
    done = {}

    def drain():
        done["frames"] = read_all(r, limit=120)
        c.close()
    import threading
    t = threading.Thread(target=drain, daemon=True)
    t.start()
    card = pending(s.api)
    if held == "approval":
        status, body = s.api.call("POST", f"/v1/approvals/{card['id']}", {"decision": "approve"})
    else:
        status, body = s.api.call("POST", f"/v1/runs/{card['run_id']}/resume",
                                  {"question_id": card["id"], "answer": "yes"})
    assert status == 200, body
    t.join(timeout=120)
    evs = [d for k, _, d, _ in done["frames"] if k == "event"]
    assert evs[-1]["type"] == "completed" and evs[-1]["status"] == "finished", evs
    return card["run_id"]


@BACKENDS
@HELD
@pytest.mark.parametrize("lost", ["both", "bridge"])
def test_a_run_lost_with_its_bridge_ends_at_restart_and_the_session_works_again(
        setup_env, tmp_path, store, held, lost):
    s, marker = stack(setup_env, tmp_path, store, held)
    sid = s.session()
    send(s, sid, "deploy with the tool")
    card = pending(s.api)
    run_id = card["run_id"]
    if lost == "both":
        # A crash of the host's processes: callbackd and the bridge, both -9.
        os.killpg(os.getpgid(s.run.bridge_pid), signal.SIGKILL)
        os.kill(s.run.proc.popen.pid, signal.SIGKILL)
        s.run.proc.popen.wait(timeout=10)
    else:
        # The bridge alone (a node crash): callbackd exits with its status.
        os.killpg(os.getpgid(s.run.bridge_pid), signal.SIGKILL)
        rc = s.run.proc.popen.wait(timeout=STOP_TIMEOUT + 10)
        assert rc == 137, s.run.proc.stderr_text()[-3000:]
    s.start()
    run = terminal(s.api, run_id, limit=10)
    assert run["status"] == "error", run
    assert "the bridge that ran it stopped" in json.dumps(run), run
    c, r = s.api.open("GET", f"/v1/runs/{run_id}/stream")
    evs = [d for k, _, d, _ in read_all(r, limit=30) if k == "event"]
    c.close()
    assert evs[-1]["type"] == "error", evs
    status, one = s.api.call("GET", f"/v1/approvals/{card['id']}")
    # A bridge that dies alone drops its tool call's connection first: the approval says so
    # ("the bridge dropped the tool call") before the run's end could.
    reasons = ["the bridge that ran it stopped"] + (["the bridge dropped the tool call"] if lost == "bridge" else [])
    assert one["state"] == "cancelled" and any(r in one["reason"] for r in reasons), one
    status, late = s.api.call("POST", f"/v1/approvals/{card['id']}", {"decision": "approve"})
    assert status == 409, late
    assert not marker.exists(), "the tool ran"
    # The session works again: a new turn finishes, forks and the session deletes.
    new_run = settle_new_turn(s, sid, held)
    status, forked = s.api.call("POST", f"/v1/sessions/{sid}/fork", {"run_id": new_run, "at": "after"})
    assert status == 201, forked
    status, body = s.api.call("DELETE", f"/v1/sessions/{sid}")
    assert status == 204, body
    s.stop()
