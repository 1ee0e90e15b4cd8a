"""Issue 15, end to end: a command tool that needs approval, with `callbackd run -- <real
bridge>` and the fake backend. The run shows approval_required; an approval over the API runs
the tool and the run finishes with its result; a denial and a timeout give the model an error
result and the run still finishes; a rule lets dev calls through and holds prod ones; a
stream opened after the approval was raised shows it; a restart of callbackd while an
approval is pending ends the call as cancelled, and the stream says so.
"""
from __future__ import annotations

import json
import signal
import socket
import threading
import time
import tomllib

import harness as h
from test_run_api_e2e import Api, ApiStack, frames, read_all

DEPLOY = """
[[tools.command]]
name = "deploy"
description = "Deploys to an environment"
argv = ["sh", "-c", "echo ran >> '{marker}'; echo '{{\\"deployed\\": true}}'"]
input_schema = {{ type = "object", properties = {{ env = {{ type = "string" }} }} }}
approval = {{ pointer = "/env", values = ["prod"] }}
approval_timeout_ms = {timeout}
"""


def marker(tmp) -> str:
    """The deploy tool's side effect: a line in this file each time it runs."""
    return str(tmp / "deploy-runs")


def runs(tmp) -> int:
    """How many times the deploy tool ran."""
    try:
        with open(marker(tmp)) as f:
            return len(f.read().splitlines())
    except FileNotFoundError:
        return 0


def stack(env, tmp, args: dict, timeout: int = 60000) -> ApiStack:
    return ApiStack(env, tmp, scenario="tool", config=DEPLOY.format(timeout=timeout, marker=marker(tmp)),
                    backend_env={"FB_TOOL_NAME": "deploy", "FB_TOOL_ARGS": json.dumps(args)})


def until_approval(resp) -> tuple[dict, list]:
    seen = []
    for kind, i, d, raw in frames(resp):
        seen.append((kind, i, d, raw))
        if kind == "event" and d["type"] == "approval_required":
            assert i is None, "an approval is not a numbered event"
            return d["approval"], seen
    raise AssertionError(f"no approval_required in {seen}")


def events(fs) -> list[dict]:
    return [d for k, _, d, _ in fs if k == "event"]


def test_approve_runs_the_tool_and_a_late_stream_sees_the_card(setup_env, tmp_path):
    s = stack(setup_env, tmp_path, {"env": "prod"})
    sid = s.session()
    c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": "deploy with the tool"})
    card, seen = until_approval(r)
    assert card["tool"] == "deploy" and card["args"] == {"env": "prod"} and card["expires_at"]
    run_id = events(seen)[0]["run_id"]
    # A stream opened after the approval was raised still shows it.
    c2, r2 = s.api.open("GET", f"/v1/runs/{run_id}/stream")
    late, _ = until_approval(r2)
    assert late["id"] == card["id"]
    c2.close()
    status, listed = s.api.call("GET", "/v1/approvals?state=pending")
    assert [a["id"] for a in listed["approvals"]] == [card["id"]]
    assert runs(tmp_path) == 0, "the tool ran before it was approved"
    status, decided = s.api.call("POST", f"/v1/approvals/{card['id']}", {"decision": "approve"})
    assert status == 200 and decided["state"] == "approved", decided
    rest = events(read_all(r, limit=60))
    c.close()
    kinds = [e["type"] for e in rest]
    assert "approval_resolved" in kinds and kinds[-1] == "completed", kinds
    tool = [e for e in rest if e["type"] == "tool_completed"][0]
    assert tool["outcome"] == "ok" and tool["tool"] == "deploy"
    assert "deployed" in rest[-1]["output"] and rest[-1]["status"] == "finished"
    assert runs(tmp_path) == 1, "the approved call ran its tool once"


def test_deny_and_timeout_give_the_model_an_error_and_the_run_finishes(setup_env, tmp_path):
    s = stack(setup_env, tmp_path, {"env": "prod"}, timeout=1500)
    sid = s.session()
    c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": "deploy with the tool"})
    card, _ = until_approval(r)
    status, _ = s.api.call("POST", f"/v1/approvals/{card['id']}", {"decision": "deny", "reason": "freeze"})
    assert status == 200
    rest = events(read_all(r, limit=60))
    c.close()
    tool = [e for e in rest if e["type"] == "tool_completed"][0]
    assert tool["outcome"] == "denied", rest
    assert runs(tmp_path) == 0, "the denied call ran its tool"
    assert rest[-1]["type"] == "completed" and rest[-1]["status"] == "finished"
    assert "denied" in rest[-1]["output"] and "freeze" in rest[-1]["output"], rest[-1]
    # Nobody decides: after approval_timeout_ms the call is denied.
    c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": "deploy with the tool again"})
    rest = events(read_all(r, limit=60))
    c.close()
    resolved = [e for e in rest if e["type"] == "approval_resolved"]
    assert resolved and resolved[0]["decision"] == "expired", rest
    assert rest[-1]["type"] == "completed" and "nobody approved" in rest[-1]["output"]
    assert runs(tmp_path) == 0, "a denied or expired call ran its tool"


def test_a_rule_lets_dev_calls_through(setup_env, tmp_path):
    s = stack(setup_env, tmp_path, {"env": "dev"})
    sid = s.session()
    c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": "deploy with the tool"})
    rest = events(read_all(r, limit=60))
    c.close()
    assert "approval_required" not in [e["type"] for e in rest]
    assert [e for e in rest if e["type"] == "tool_completed"][0]["outcome"] == "ok"
    assert runs(tmp_path) == 1, "the dev call ran its tool"


def test_a_restart_while_pending_cancels_the_call_and_it_never_runs(setup_env, tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    backend = h.FakeBackend(setup_env, tmp_path, "tool",
                            extra_env={"FB_TOOL_NAME": "deploy", "FB_TOOL_ARGS": json.dumps({"env": "prod"})})
    db = tmp_path / "data" / "callbackd.db"
    db.parent.mkdir(parents=True)
    config = tmp_path / "callbackd.toml"
    # Short: after the restart the bridge calls the tool again, and those calls are held too;
    # nobody decides them, so they are denied when this runs out and the run can end.
    config.write_text(DEPLOY.format(timeout=3000, marker=marker(tmp_path)))
    ws = tmp_path / "ws"
    store_token, tool_token = h.rand_token(), h.rand_token()
    daemon = h.Callbackd(tmp_path, db, store_token, tool_token)

    def start():
        daemon.proc = h.Proc("callbackd", [h.callbackd_bin(), "serve", "--listen", f"127.0.0.1:{port}",
                                           "--db", db, "--config", config], tmp_path / "logs", cwd=tmp_path,
                             env={"CALLBACKD_STORE_TOKEN": store_token, "CALLBACKD_TOOL_TOKEN": tool_token})
        daemon.ready = json.loads(daemon.proc.wait_for_line("callbackd ready ", timeout=30))
        daemon.url = daemon.ready["url"]

    start()
    bridge = h.Bridge(setup_env, tmp_path, ws, backend, daemon)
    decl = {"deploy": {"description": "Deploys", "inputSchema": {
        "type": "object", "properties": {"env": {"type": "string"}}}}}
    aid = bridge.client.create_agent(ws, custom_tools=decl)
    result = {}

    def send():
        try:
            result["r"] = bridge.client.send(aid, "deploy with the tool", timeout=120)
        except BaseException as e:      # the main thread asserts on it
            result["error"] = repr(e)

    t = threading.Thread(target=send, daemon=True)
    t.start()
    api = Api(daemon.url, tomllib.loads((db.parent / "callbackd.tokens").read_text())["api_token"])
    deadline = time.monotonic() + 30
    pending = []
    while not pending and time.monotonic() < deadline:
        pending = api.call("GET", "/v1/approvals")[1].get("approvals", [])
        time.sleep(0.05)
    assert pending, "the call was never held"
    run_id = pending[0]["run_id"]
    # Killed: a SIGTERM would drain, and the held call would end within the drain.
    daemon.proc.stop(signal.SIGKILL)
    start()
    t.join(timeout=90)
    assert not t.is_alive(), "the bridge's Send never ended"
    assert "error" not in result, f"the bridge's Send failed: {result['error']}"
    _, run_result = result["r"]
    # The killed daemon's approval is cancelled once its lease has run out (15 s) and a
    # daemon sweeps (every 5 s): a restarted daemon cannot tell a dead owner from a live one
    # sharing the database before that.
    deadline = time.monotonic() + 40
    while True:
        status, all_ = api.call("GET", "/v1/approvals?state=all")
        approvals = sorted(all_["approvals"], key=lambda a: a["created_at"])
        if approvals[0]["state"] != "pending" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert approvals[0]["state"] == "cancelled" and approvals[0]["decided_by"] == "callbackd", all_
    # When the bridge calls the tool again after the restart, that call is held too; nobody
    # decides it, so it expires.
    assert all(a["state"] == "expired" for a in approvals[1:]), all_
    c, r = api.open("GET", f"/v1/runs/{run_id}/stream")
    evs = events(read_all(r, limit=60))
    c.close()
    # Never "unknown": a held call never ran. Each call's completion says how its (last)
    # approval ended: cancelled by the restart, or expired when nobody decided a retry's.
    tool = [e for e in evs if e["type"] in ("tool_completed", "tool_outcome_unknown")]
    assert tool and all(e["type"] == "tool_completed" for e in tool), evs
    last = {a["tool_call_id"]: a["state"] for a in approvals}
    # A call the bridge made while no daemon listened (between the kill and the restart)
    # never reached callbackd: no approval, and the bridge's own failure (`error`).
    meant = {"cancelled": "cancelled", "expired": "expired", None: "error"}
    assert [e["outcome"] for e in tool] == [meant[last.get(e["tool_call_id"])] for e in tool], (evs, all_)
    # What the name no longer claims: that the stream shows the restart's cancellation. The
    # killed daemon's call may have no completion in the stream at all: the bridge's
    # append of it falls in the restart window and can be lost (the SDK then retries the turn,
    # toolu_fake_2), and when it is stored it can follow the retried call's expiry. Whichever,
    # the comprehension above already holds any completion to its approval's end, and the
    # tool never ran (below).
    assert evs[-1]["type"] == "completed" and evs[-1]["status"] == "finished", evs
    assert run_result["status"] == "RUN_LIFECYCLE_STATUS_FINISHED", run_result
    assert run_result["result"]["result"] == evs[-1]["output"], (run_result, evs[-1])
    assert runs(tmp_path) == 0, "the held call ran its tool"
    bridge.stop()
    daemon.proc.stop()
