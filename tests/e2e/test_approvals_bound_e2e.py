"""Issue 25, end to end with the real bridge and the fake backend (with its heartbeats): an
approval lives and dies with its call, a second daemon on the same database leaves the first
one's approval alone and its decision reaches the holder, a call held for minutes finishes
the turn, and edited arguments are what the tool receives. The `deploy` tool writes the
arguments it ran with to a marker file: its absence proves it never ran.

Each test runs on SQLite and on PostgreSQL (CALLBACKD_TEST_PG_URL; skipped without it outside
CI), but the minutes-long hold, on SQLite only (it is the bridge's and the backend's behaviour
under test, and it costs three minutes).
"""
from __future__ import annotations

import json
import os
import secrets
import threading
import time
import tomllib

import pytest

import harness as h
from test_run_api_e2e import Api, ApiStack, read_all

BACKENDS = pytest.mark.parametrize("store", ["sqlite", "postgres"])


def store_config(store: str, tmp, poll_ms: int | None = None) -> str:
    """The `[store]` (and `[tools]`) TOML for a test on `store`: PostgreSQL in a schema of
    its own, the tokens file in the test's data directory."""
    out = ""
    if store == "postgres":
        out += f'[store]\nschema = "e2e_appr_{secrets.token_hex(6)}"\npath = "{tmp / "data" / "callbackd.db"}"\n'
    if poll_ms is not None:
        out += f"[tools]\napproval_poll_ms = {poll_ms}\n"
    return out


class Stack(ApiStack):
    """An ApiStack whose daemon's `--db` is `location`: the SQLite file, or the PostgreSQL URL
    (`--db` picks the backend; the schema and the tokens file's place come from the config)."""

    def __init__(self, env, tmp, store: str, **kw):
        self.store = store
        if store == "postgres":
            from test_postgres_e2e import pg_url
            self.location = pg_url()
        else:
            self.location = str(tmp / "data" / "callbackd.db")
        super().__init__(env, tmp, **kw)

    def start(self, listen: str = "127.0.0.1:0"):
        self.run = h.CallbackdRun(self.env, self.tmp, self.ws, self.backend, self.location, h.rand_token(),
                                  h.rand_token(), listen=listen, extra_args=["--config", str(self.config)])
        # A PostgreSQL test must not pass on SQLite: no SQLite file is made beside the tokens.
        assert self.db.exists() == (self.store == "sqlite"), list(self.db.parent.iterdir())
        tokens = tomllib.loads((self.db.parent / "callbackd.tokens").read_text())
        self.api = Api(self.run.daemon_ready["url"], tokens["api_token"])
        return self

DEPLOY = """
[[tools.command]]
name = "deploy"
description = "Deploys to an environment"
argv = ["sh", "-c", "cat > '{marker}'; echo '{{\\"deployed\\": true}}'"]
input_schema = {{ type = "object", properties = {{ env = {{ type = "string" }} }} }}
approval = "always"
approval_timeout_ms = {timeout}
"""


def stack(env, tmp, timeout: int = 600000, store: str = "sqlite", poll_ms: int | None = None) -> tuple[ApiStack, object]:
    marker = tmp / "deployed.json"
    config = store_config(store, tmp, poll_ms) + DEPLOY.format(marker=marker, timeout=timeout)
    s = Stack(env, tmp, store, scenario="tool", config=config,
                 backend_env={"FB_TOOL_NAME": "deploy", "FB_TOOL_ARGS": json.dumps({"env": "prod"})})
    return s, marker


def pending(api: Api, limit: float = 60) -> dict:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        items = api.call("GET", "/v1/approvals")[1].get("approvals", [])
        if items:
            return items[0]
        time.sleep(0.1)
    raise AssertionError("the call was never held")


def send(s: ApiStack, sid: str, text: str) -> threading.Thread:
    """Posts a message and reads its stream to the end in the background."""
    def go():
        c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": text})
        try:
            for _ in iter(r.readline, b""):
                pass
        except Exception:
            pass
        c.close()
    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


def run_events(api: Api, run_id: str, limit: float = 120) -> list[dict]:
    """The run's events once it has ended (replayed from the start)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        status, run = api.call("GET", f"/v1/runs/{run_id}")
        if run.get("status") in ("finished", "error", "cancelled", "expired"):
            c, r = api.open("GET", f"/v1/runs/{run_id}/stream")
            evs = [d for k, _, d, _ in read_all(r, limit=60) if k == "event"]
            c.close()
            return evs
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} did not end")


@BACKENDS
def test_cancelling_a_run_cancels_its_pending_approval_and_the_tool_never_runs(setup_env, tmp_path, store):
    s, marker = stack(setup_env, tmp_path, store=store)
    sid = s.session()
    send(s, sid, "deploy with the tool")
    card = pending(s.api)
    run_id = card["run_id"]
    status, body = s.api.call("POST", f"/v1/runs/{run_id}/cancel")
    assert status == 202, body
    status, one = s.api.call("GET", f"/v1/approvals/{card['id']}")
    assert one["state"] == "cancelled" and run_id in one["reason"], one
    status, late = s.api.call("POST", f"/v1/approvals/{card['id']}", {"decision": "approve"})
    assert status == 409 and "cancelled" in late["detail"], late
    evs = run_events(s.api, run_id)
    assert not marker.exists(), "the tool of a cancelled run ran"
    status, run = s.api.call("GET", f"/v1/runs/{run_id}")
    assert run["status"] == "cancelled", run
    assert all(c["outcome"] != "ok" for c in run["tool_calls"]), run
    s.stop()


@BACKENDS
def test_a_second_daemon_leaves_the_approval_pending_and_approving_through_it_runs_the_tool_in_the_first(
        setup_env, tmp_path, store):
    # On PostgreSQL the holder polls once an hour: only the NOTIFY of the decision made
    # through B can wake it.
    s, marker = stack(setup_env, tmp_path, store=store, poll_ms=3_600_000 if store == "postgres" else None)
    sid = s.session()
    send(s, sid, "deploy with the tool")
    card = pending(s.api)
    # Daemon B: `callbackd serve` on the same database (and tokens file).
    b = h.Proc("callbackd-b", [h.callbackd_bin(), "serve", "--listen", "127.0.0.1:0", "--db", s.location,
                               "--config", s.config], tmp_path / "logs-b", cwd=tmp_path,
               env={"CALLBACKD_STORE_TOKEN": h.rand_token(), "CALLBACKD_TOOL_TOKEN": h.rand_token()})
    ready = json.loads(b.wait_for_line("callbackd ready ", timeout=30))
    api_b = Api(ready["url"], tomllib.loads((s.db.parent / "callbackd.tokens").read_text())["api_token"])
    time.sleep(1)
    status, one = api_b.call("GET", f"/v1/approvals/{card['id']}")
    assert one["state"] == "pending", one
    status, decided = api_b.call("POST", f"/v1/approvals/{card['id']}", {"decision": "approve"})
    assert status == 200 and decided["state"] == "approved", decided
    evs = run_events(s.api, card["run_id"])
    assert json.loads(marker.read_text()) == {"env": "prod"}
    done = evs[-1]
    assert done["type"] == "completed" and done["status"] == "finished" and "deployed" in done["output"], evs
    b.stop()
    s.stop()


@BACKENDS
def test_edited_arguments_are_what_the_tool_receives(setup_env, tmp_path, store):
    s, marker = stack(setup_env, tmp_path, store=store)
    sid = s.session()
    send(s, sid, "deploy with the tool")
    card = pending(s.api)
    status, bad = s.api.call("POST", f"/v1/approvals/{card['id']}", {"decision": "approve", "args": {"env": 1}})
    assert status == 400 and "/env" in bad["detail"] and "type" in bad["detail"], bad
    status, ok = s.api.call("POST", f"/v1/approvals/{card['id']}",
                            {"decision": "approve", "args": {"env": "staging"}})
    assert status == 200 and ok["edited"] is True and ok["approved_args"] == {"env": "staging"}, ok
    evs = run_events(s.api, card["run_id"])
    assert json.loads(marker.read_text()) == {"env": "staging"}
    assert evs[-1]["type"] == "completed" and evs[-1]["status"] == "finished", evs
    s.stop()


HOLD_S = float(os.environ.get("CALLBACKD_E2E_HOLD_S", "180"))


def test_a_call_held_for_minutes_then_approved_finishes_the_turn_with_its_result(setup_env, tmp_path):
    s, marker = stack(setup_env, tmp_path)
    sid = s.session()
    send(s, sid, "deploy with the tool")
    card = pending(s.api)
    time.sleep(HOLD_S)
    status, one = s.api.call("GET", f"/v1/approvals/{card['id']}")
    assert one["state"] == "pending", one
    status, decided = s.api.call("POST", f"/v1/approvals/{card['id']}", {"decision": "approve"})
    assert status == 200, decided
    evs = run_events(s.api, card["run_id"])
    assert marker.exists()
    done = evs[-1]
    assert done["type"] == "completed" and done["status"] == "finished" and "deployed" in done["output"], evs
    # One attempt: the bridge never abandoned the held call and retried the turn.
    status, all_ = s.api.call("GET", "/v1/approvals?state=all")
    assert len(all_["approvals"]) == 1, all_
    s.stop()


@BACKENDS
def test_ask_user_answered_through_resume_reaches_the_model(setup_env, tmp_path, store):
    s = Stack(setup_env, tmp_path, store, scenario="tool", config=store_config(store, tmp_path),
                 backend_env={"FB_TOOL_NAME": "ask_user",
                              "FB_TOOL_ARGS": json.dumps({"question": "Deploy now?", "options": ["yes", "no"]})})
    sid = s.session()
    send(s, sid, "ask me first")
    q = pending(s.api)
    assert q["tool"] == "ask_user", q
    status, body = s.api.call("POST", f"/v1/runs/{q['run_id']}/resume", {"question_id": q["id"], "answer": "yes, now"})
    assert status == 200, body
    evs = run_events(s.api, q["run_id"])
    done = evs[-1]
    assert done["type"] == "completed" and done["status"] == "finished" and "yes, now" in done["output"], evs
    status, again = s.api.call("POST", f"/v1/runs/{q['run_id']}/resume", {"question_id": q["id"], "answer": "no"})
    assert status == 409, again
    s.stop()
