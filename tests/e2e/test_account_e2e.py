"""Issue 35, end to end (real bridge, fake backend): one account of each tool call. An edited
approval, a denial after a wait of a few seconds, a call whose run was cancelled while it was
held, and an answered question (through `callbackd answer`) each tell the same story in the
run state, the per-call endpoint, the live stream, the replay and `callbackd follow`; the
prompt is in `run_started` for the first reader as for a replay.
"""
from __future__ import annotations

import json
import subprocess
import threading
import time

import harness as h
from test_run_api_e2e import ApiStack, durable, read_all

DEPLOY = """
[[tools.command]]
name = "deploy"
description = "Deploys a version"
argv = ["sh", "-c", "read a; echo \\"{{\\\\\\"deployed\\\\\\": $a}}\\""]
input_schema = {{ type = "object", properties = {{ version = {{ type = "string" }} }} }}
approval = "always"
approval_timeout_ms = 60000
"""
ASKED = {"version": "1.4.2"}
EDITED = {"version": "1.4.2-hotfix1"}
# The fields every view gives of a call.
ACCOUNT = ["outcome", "arguments", "requested_arguments", "result", "duration_ms", "waited_ms", "decision", "question"]


def stack(env, tmp) -> ApiStack:
    return ApiStack(env, tmp, scenario="tool", config=DEPLOY.format(),
                    backend_env={"FB_TOOL_NAME": "deploy", "FB_TOOL_ARGS": json.dumps(ASKED)})


def events(fs) -> list[dict]:
    return [d for k, _, d, _ in fs if k == "event"]


def pending(s: ApiStack, limit: float = 30) -> dict:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        got = s.api.call("GET", "/v1/approvals")[1].get("approvals", [])
        if got:
            return got[0]
        time.sleep(0.05)
    raise AssertionError("no call was held")


def start(s: ApiStack, sid: str, text: str) -> tuple[object, list, threading.Thread]:
    """Sends a message; its live stream is read to the end on a thread (into the list)."""
    c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": text})
    live: list = []
    t = threading.Thread(target=lambda: live.extend(read_all(r, limit=90)), daemon=True)
    t.start()
    return c, live, t


def replay(s: ApiStack, run_id: str) -> list:
    c, r = s.api.open("GET", f"/v1/runs/{run_id}/stream")
    out = read_all(r)
    c.close()
    return out


def ends(fs) -> list[str]:
    """The raw tool_completed events, id-less ones (closed by the run's end) included."""
    return [raw for k, _, d, raw in fs if k == "event" and d["type"] == "tool_completed"]


def same_story(s: ApiStack, run_id: str, live: list, call_id: str) -> dict:
    """The call's account in the run state; asserts the per-call endpoint, the live stream
    and a replay say the same, and the replay is byte equal to the live stream."""
    status, state = s.api.call("GET", f"/v1/runs/{run_id}")
    assert status == 200, state
    calls = [c for c in state["tool_calls"] if c["tool_call_id"] == call_id]
    assert len(calls) == 1, state
    call = calls[0]
    status, one = s.api.call("GET", f"/v1/runs/{run_id}/tool_calls/{call_id}")
    assert status == 200, one
    again = replay(s, run_id)
    assert durable(again) == durable(live), "the replay is the live stream, byte for byte"
    assert ends(again) == ends(live), "every call's end, byte for byte"
    ev = [d for d in events(again) if d["type"] == "tool_completed" and d["tool_call_id"] == call_id]
    assert len(ev) == 1, events(again)
    for k in ACCOUNT:
        assert one.get(k) == call.get(k), (k, one, call)
        assert ev[0].get(k) == call.get(k), (k, ev[0], call)
    return call


def follow(s: ApiStack, run_id: str, finished: bool = True) -> str:
    """`callbackd follow` of an ended run: its replay as text (it exits 0 for a finished run)."""
    out = subprocess.run([h.callbackd_bin(), "follow", run_id, "--url", s.api.url, "--token", s.api.token],
                         capture_output=True, text=True, timeout=60)
    assert (out.returncode == 0) == finished, out.stderr
    return out.stdout


def test_an_edited_approval_and_a_late_denial_tell_what_ran_everywhere(setup_env, tmp_path):
    s = stack(setup_env, tmp_path)
    sid = s.session()
    c, live, t = start(s, sid, "deploy with the tool")
    card = pending(s)
    run_id = card["run_id"]
    assert card["args"] == ASKED, card
    status, body = s.api.call("POST", f"/v1/approvals/{card['id']}", {"decision": "approve", "args": EDITED})
    assert status == 200, body
    t.join(90)
    c.close()
    call = same_story(s, run_id, live, card["tool_call_id"])
    assert call["outcome"] == "ok", call
    assert call["arguments"] == EDITED and call["requested_arguments"] == ASKED, call
    # The tool's own JSON, not the bridge's {"status": "success", "value": {"content": ...}}.
    assert call["result"] == {"deployed": EDITED}, call
    assert call["decision"]["decision"] == "approved" and call["decision"]["edited"] is True, call
    assert call["waited_ms"] is not None and call["duration_ms"] is not None, call
    status, one = s.api.call("GET", f"/v1/runs/{run_id}/tool_calls/{card['tool_call_id']}")
    assert one["raw_result"]["value"]["content"], one
    text = follow(s, run_id)
    assert 'ran with {"version":"1.4.2-hotfix1"}' in text and '(the model asked {"version":"1.4.2"})' in text, text
    assert "approved by" in text, text

    # Denied after a wait of a few seconds: the wait is waited_ms, not duration_ms.
    c, live, t = start(s, sid, "deploy with the tool again")
    card = pending(s)
    time.sleep(3)
    status, body = s.api.call("POST", f"/v1/approvals/{card['id']}", {"decision": "deny", "reason": "freeze"})
    assert status == 200, body
    t.join(90)
    c.close()
    call = same_story(s, card["run_id"], live, card["tool_call_id"])
    assert call["outcome"] == "denied", call
    assert call["waited_ms"] >= 3000, call
    assert call["duration_ms"] is None or call["duration_ms"] < 1000, call
    assert call["decision"]["decision"] == "denied" and call["decision"]["reason"] == "freeze", call
    assert "requested_arguments" not in call and call["arguments"] == ASKED, call
    text = follow(s, card["run_id"])
    assert "deploy denied" in text and "denied by" in text and ": freeze" in text, text
    s.stop()


def test_a_call_held_when_its_run_is_cancelled_ends_in_the_replay(setup_env, tmp_path):
    s = stack(setup_env, tmp_path)
    sid = s.session()
    c, live, t = start(s, sid, "deploy with the tool")
    card = pending(s)
    run_id = card["run_id"]
    status, body = s.api.call("POST", f"/v1/runs/{run_id}/cancel")
    assert status in (200, 202), body
    t.join(90)
    c.close()
    call = same_story(s, run_id, live, card["tool_call_id"])
    assert call["outcome"] == "cancelled" and call["result"] is None, call
    evs = events(replay(s, run_id))
    kinds = [e["type"] for e in evs]
    assert kinds[-1] == "completed" and evs[-1]["status"] == "cancelled", kinds
    assert kinds[-2] == "tool_completed" and evs[-2]["seq"] == evs[-1]["seq"], kinds
    # The run state adds what became of the approval.
    state = s.api.call("GET", f"/v1/runs/{run_id}")[1]
    held = [x for x in state["tool_calls"] if x["tool_call_id"] == card["tool_call_id"]][0]
    # POST .../cancel cancels the held call before the bridge ends the run: the replay tells it.
    assert held["decision"]["decision"] == "cancelled" and held["decision"]["by"] == "callbackd", held
    text = follow(s, run_id, finished=False)
    assert "deploy cancelled" in text and "cancelled by callbackd" in text, text
    s.stop()


def test_an_answered_question_is_a_question_everywhere(setup_env, tmp_path):
    s = stack(setup_env, tmp_path)
    sid = s.session()
    s.backend.post_script({"steps": [{"tool": "ask_user", "args": {"question": "Which region?", "options": ["eu", "us"]}},
                                     {"textFromLastTool": "the person said: "}]})
    c, live, t = start(s, sid, "ask me")
    q = pending(s)
    assert q["tool"] == "ask_user", q
    out = subprocess.run([h.callbackd_bin(), "answer", q["run_id"], q["id"], "eu", "--url", s.api.url, "--token", s.api.token],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "answered" in out.stdout, (out.stdout, out.stderr)
    t.join(90)
    c.close()
    kinds = [d["type"] for d in events(live)]
    assert "question" in kinds and "question_resolved" in kinds and "approval_resolved" not in kinds, kinds
    resolved = [d for d in events(live) if d["type"] == "question_resolved"][0]
    assert resolved["outcome"] == "answered" and resolved["answer"] == "eu", resolved
    call = same_story(s, q["run_id"], live, q["tool_call_id"])
    assert call["question"]["text"] == "Which region?" and call["question"]["options"] == ["eu", "us"], call
    assert call["question"]["answer"] == "eu" and call["question"]["answered_by"], call
    assert "requested_arguments" not in call and "decision" not in call, call
    assert call["result"] == {"answer": "eu"}, call
    text = follow(s, q["run_id"])
    assert 'asked "Which region?", answered "eu"' in text and "edited" not in text, text
    listed = subprocess.run([h.callbackd_bin(), "approvals", "--all", "--url", s.api.url, "--token", s.api.token],
                            capture_output=True, text=True, timeout=30)
    assert 'question "Which region?" -> "eu"' in listed.stdout, listed.stdout
    s.stop()


def test_the_first_reader_gets_the_prompt_a_replay_gets(setup_env, tmp_path):
    """A reader that finds the run in the session's list while the message is being sent, and
    opens its stream at once (before POST .../messages recorded the text), gets the same
    run_started as the sender's stream and every replay."""
    s = ApiStack(setup_env, tmp_path, scenario="text")
    sid = s.session()
    early: list = []

    def watch():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            runs = s.api.call("GET", f"/v1/sessions/{sid}/runs")[1].get("runs", [])
            if runs:
                c, r = s.api.open("GET", f"/v1/runs/{runs[0]['run_id']}/stream")
                early.extend(read_all(r))
                c.close()
                return
            time.sleep(0.002)

    w = threading.Thread(target=watch, daemon=True)
    w.start()
    c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": "hello there"})
    first = read_all(r)
    c.close()
    w.join(60)
    started = [raw for k, i, d, raw in first + early if k == "event" and d["type"] == "run_started"]
    assert len(started) == 2 and started[0] == started[1], started
    assert json.loads(started[0])["input"] == {"text": "hello there"}, started[0]
    run_id = json.loads(started[0])["run_id"]
    again = [raw for k, i, d, raw in replay(s, run_id) if k == "event" and d["type"] == "run_started"]
    assert again == started[:1], (again, started)
    s.stop()
