"""Issue 37, end to end: `POST /v1/ag-ui` driven by the official AG-UI client
(`@ag-ui/client` 1.0's HttpAgent: its SSE parser, verifyEvents and interrupt bookkeeping)
against the real bridge and the fake backend. Every stream is also checked raw, event by event,
against `@ag-ui/core`'s EventSchema (tests/e2e/agui/driver.mjs). Cases: a text turn and a
second turn on the same thread (one session, `GET /v1/sessions/{threadId}`), a custom tool
call, an approval approved and one denied through `resume` (the tool ran / never ran), an
`ask_user` question answered through `resume`, a frontend tool (declared on a thread whose
agent the bridge already holds, and on a new thread) answered by a `tool` message or left
unanswered until its timeout, bad input, and examples/ag_ui/chat.mjs as a person would use it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from test_approvals_e2e import events, marker, runs
from test_run_api_e2e import ApiStack, read_all

HERE = Path(__file__).resolve().parent

DEPLOY = """
[[tools.command]]
name = "deploy"
description = "Deploys to an environment"
argv = ["sh", "-c", "echo ran >> '{marker}'; python3 -c 'import json, sys; print(\\"deployed-\\" + json.load(sys.stdin)[\\"env\\"])'"]
input_schema = {{ type = "object", properties = {{ env = {{ type = "string", enum = ["dev", "prod"] }} }}, required = ["env"] }}
approval = {{ pointer = "/env", values = ["prod"] }}

"""


def node_modules() -> str:
    mods = os.environ.get("CALLBACKD_AGUI_NODE_MODULES") or str(
        Path(os.environ.get("CALLBACKD_E2E_DIR", HERE.parent.parent / "target" / "e2e")) / "agui" / "node_modules")
    assert (Path(mods) / "@ag-ui" / "client").is_dir(), f"{mods} lacks @ag-ui/client: run tests/e2e/setup.sh"
    return mods


class Thread:
    """One AG-UI thread: an HttpAgent in a node process, fed commands line by line."""

    def __init__(self, env: dict, tmp: Path, url: str, token: str, thread_id: str | None = None):
        d = tmp / f"agui-{uuid.uuid4().hex[:8]}"
        d.mkdir()
        shutil.copy(HERE / "agui" / "driver.mjs", d / "driver.mjs")
        (d / "node_modules").symlink_to(node_modules())
        self.thread_id = thread_id or f"thread-{uuid.uuid4().hex[:8]}"
        self.proc = subprocess.Popen(
            [env["NODE"], str(d / "driver.mjs")], cwd=d, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=open(d / "stderr.log", "w"), text=True,
            env={**os.environ, "AGUI_URL": url.rstrip("/") + "/v1/ag-ui", "AGUI_TOKEN": token,
                 "AGUI_THREAD": self.thread_id})
        self.stderr = d / "stderr.log"

    def cmd(self, **c) -> dict:
        self.proc.stdin.write(json.dumps(c) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the AG-UI driver died: {self.stderr.read_text()}"
        return json.loads(line)

    def run(self, **params) -> dict:
        out = self.cmd(op="run", params=params)
        if out["ok"]:
            # verifyEvents passed (the client raises otherwise); the raw events match the schema.
            assert out["schemaErrors"] == [], out["schemaErrors"]
            assert [e["type"] for e in out["raw"]] == [e["type"] for e in out["events"]], out
        return out

    def say(self, text: str) -> dict:
        self.cmd(op="user", text=text)
        return self.run()

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def problem(out: dict) -> dict:
    """The problem+json of a refused run, as the client reports it (text for problem+json)."""
    p = out["payload"]
    return json.loads(p) if isinstance(p, str) else p


def types(out: dict) -> list[str]:
    return [e["type"] for e in out["raw"]]


def finished(out: dict) -> dict:
    last = out["raw"][-1]
    assert last["type"] == "RUN_FINISHED", out["raw"]
    return last


@pytest.fixture
def stack(setup_env, tmp_path):
    s = ApiStack(setup_env, tmp_path, scenario="text", config=DEPLOY.format(marker=marker(tmp_path)))
    yield s
    s.stop()


def thread(setup_env, tmp_path, s: ApiStack) -> Thread:
    return Thread(setup_env, tmp_path, s.run.daemon_ready["url"], s.api.token)


def test_text_turns_on_one_thread_are_one_session(setup_env, tmp_path, stack):
    t = thread(setup_env, tmp_path, stack)
    out = t.say("hello")
    assert out["ok"], out
    assert types(out) == ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
                          "RUN_FINISHED"], types(out)
    start, end = out["raw"][0], finished(out)
    assert start["threadId"] == t.thread_id and start["runId"] == end["runId"]
    assert end["outcome"] == {"type": "success"}
    [usage] = end["usage"]
    assert (usage["inputTokens"], usage["outputTokens"], usage["totalTokens"]) == (10, 5, 15), end
    assert out["raw"][2]["delta"] == "Hello from the fake model."
    assert [m["content"] for m in out["messages"] if m["role"] == "assistant"] == ["Hello from the fake model."]
    # The thread id answers as the session it started.
    status, session = stack.api.call("GET", f"/v1/sessions/{t.thread_id}")
    assert status == 200, session
    sid = session["session_id"]
    out2 = t.say("and again")
    assert out2["ok"] and finished(out2)["outcome"] == {"type": "success"}, out2
    status, page = stack.api.call("GET", f"/v1/sessions/{sid}/runs")
    assert status == 200 and len(page["runs"]) == 2, page
    assert [r["input"]["text"] for r in page["runs"]] == ["hello", "and again"], page
    status, sessions = stack.api.call("GET", "/v1/sessions")
    assert [x["session_id"] for x in sessions["sessions"]] == [sid], sessions
    t.close()


def test_a_custom_tool_call_streams_its_arguments_and_its_own_output(setup_env, tmp_path, stack):
    t = thread(setup_env, tmp_path, stack)
    stack.backend.post_script({"steps": [{"text": "Calling echo."}, {"tool": "echo", "args": {"text": "ping"}},
                                         {"textFromLastTool": "It said: "}],
                               "usage": {"inputTokens": 20, "outputTokens": 12}})
    out = t.say("use the echo tool")
    assert out["ok"], out
    ts = types(out)
    assert ts == ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
                  "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT",
                  "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_FINISHED"], ts
    start = out["raw"][4]
    assert start["toolCallName"] == "echo"
    assert json.loads(out["raw"][5]["delta"]) == {"text": "ping"}
    result = out["raw"][7]
    # The built-in echo's own output, not the bridge's wrapping of it.
    assert result["toolCallId"] == start["toolCallId"] and json.loads(result["content"]) == {"text": "ping"}, result
    # The client's own view: an assistant message with the call, and the tool message.
    calls = [c for m in out["messages"] if m["role"] == "assistant" for c in m.get("toolCalls", [])]
    assert [c["function"]["name"] for c in calls] == ["echo"]
    assert [m["content"] for m in out["messages"] if m["role"] == "tool"] == [result["content"]]
    t.close()


def deploy_script(env: str) -> dict:
    return {"steps": [{"text": "Deploying."}, {"tool": "deploy", "args": {"env": env}},
                      {"textFromLastTool": "Result: "}], "usage": {"inputTokens": 5, "outputTokens": 3}}


def interrupted(out: dict) -> dict:
    end = finished(out)
    assert end["outcome"]["type"] == "interrupt", end
    [interrupt] = end["outcome"]["interrupts"]
    return interrupt


def test_an_approval_approved_through_resume_runs_the_tool(setup_env, tmp_path, stack):
    t = thread(setup_env, tmp_path, stack)
    stack.backend.post_script(deploy_script("prod"))
    out = t.say("deploy to prod")
    assert out["ok"], out
    i = interrupted(out)
    # The held call was opened and closed before the run ended on it.
    ts = types(out)
    assert ts[-4:] == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "RUN_FINISHED"], ts
    assert i["reason"] == "tool_approval" and i["toolCallId"] == out["raw"][-4]["toolCallId"], i
    assert i["expiresAt"] and "deploy" in i["message"]
    assert i["responseSchema"]["required"] == ["approved"], i
    assert [p["id"] for p in out["pendingInterrupts"]] == [i["id"]]
    assert runs(tmp_path) == 0, "the tool ran before it was approved"
    # The console sees the same approval pending.
    status, listed = stack.api.call("GET", "/v1/approvals?state=pending")
    assert [a["id"] for a in listed["approvals"]] == [i["id"]], listed
    # A new user message while it waits is refused, naming it.
    t.cmd(op="user", text="something else")
    status, body = stack.api.call("POST", "/v1/ag-ui", {
        "threadId": t.thread_id, "runId": "r-x", "messages": [{"id": "u", "role": "user", "content": "hi"}]})
    assert status == 409 and i["id"] in body["detail"], body
    out2 = t.run(resume=[{"interruptId": i["id"], "status": "resolved", "payload": {"approved": True}}])
    assert out2["ok"], out2
    ts2 = types(out2)
    assert ts2[0] == "RUN_STARTED" and "TOOL_CALL_RESULT" in ts2, ts2
    result = next(e for e in out2["raw"] if e["type"] == "TOOL_CALL_RESULT")
    assert result["toolCallId"] == i["toolCallId"] and result["content"].strip() == "deployed-prod", result
    assert finished(out2)["outcome"] == {"type": "success"}
    assert runs(tmp_path) == 1
    status, rec = stack.api.call("GET", f"/v1/approvals/{i['id']}")
    assert rec["state"] == "approved" and "AG-UI" in rec["decided_by"], rec
    # Answered once: a second answer is refused.
    status, body = stack.api.call("POST", "/v1/ag-ui", {
        "threadId": t.thread_id, "runId": "r-y", "messages": [],
        "resume": [{"interruptId": i["id"], "status": "resolved", "payload": {"approved": True}}]})
    assert status == 409 and "already approved" in body["detail"], body
    t.close()


@pytest.mark.parametrize("how", ["denied", "cancelled"])
def test_an_approval_denied_through_resume_never_runs_the_tool(setup_env, tmp_path, stack, how):
    t = thread(setup_env, tmp_path, stack)
    stack.backend.post_script(deploy_script("prod"))
    i = interrupted(t.say("deploy to prod"))
    entry = ({"interruptId": i["id"], "status": "resolved", "payload": {"approved": False, "reason": "not today"}}
             if how == "denied" else {"interruptId": i["id"], "status": "cancelled"})
    out = t.run(resume=[entry])
    assert out["ok"], out
    result = next(e for e in out["raw"] if e["type"] == "TOOL_CALL_RESULT")
    assert result["toolCallId"] == i["toolCallId"] and result["content"].startswith("denied"), result
    assert finished(out)["outcome"] == {"type": "success"}
    assert runs(tmp_path) == 0, "a denied call ran"
    status, rec = stack.api.call("GET", f"/v1/approvals/{i['id']}")
    assert rec["state"] == "denied", rec
    t.close()


def test_edited_arguments_are_checked_like_the_consoles(setup_env, tmp_path, stack):
    t = thread(setup_env, tmp_path, stack)
    stack.backend.post_script(deploy_script("prod"))
    i = interrupted(t.say("deploy to prod"))
    bad = t.run(resume=[{"interruptId": i["id"], "status": "resolved",
                         "payload": {"approved": True, "arguments": {"env": "moon"}}}])
    assert not bad["ok"] and bad["status"] == 400, bad
    detail = problem(bad)["detail"]
    assert "resume[0]" in detail and "/env" in detail, bad
    status, rec = stack.api.call("GET", f"/v1/approvals/{i['id']}")
    assert rec["state"] == "pending", "a refused edit decided the approval"
    out = t.run(resume=[{"interruptId": i["id"], "status": "resolved",
                         "payload": {"approved": True, "arguments": {"env": "dev"}}}])
    assert out["ok"], out
    result = next(e for e in out["raw"] if e["type"] == "TOOL_CALL_RESULT")
    assert result["content"].strip() == "deployed-dev", result
    t.close()


def test_an_ask_user_question_is_an_interrupt_answered_through_resume(setup_env, tmp_path, stack):
    t = thread(setup_env, tmp_path, stack)
    stack.backend.post_script({"steps": [{"tool": "ask_user", "args": {"question": "Which region?",
                                                                       "options": ["eu", "us"]}},
                                         {"textFromLastTool": "You chose: "}]})
    out = t.say("ask me")
    assert out["ok"], out
    i = interrupted(out)
    assert i["reason"] == "input_required" and i["message"] == "Which region?", i
    assert i["responseSchema"]["properties"]["answer"]["examples"] == ["eu", "us"], i
    out2 = t.run(resume=[{"interruptId": i["id"], "status": "resolved", "payload": {"answer": "eu"}}])
    assert out2["ok"], out2
    result = next(e for e in out2["raw"] if e["type"] == "TOOL_CALL_RESULT")
    assert result["toolCallId"] == i["toolCallId"] and "eu" in result["content"], result
    text = "".join(e["delta"] for e in out2["raw"] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert "eu" in text, out2["raw"]
    t.close()


PICK = {"name": "pick_color", "description": "Asks the person in the app to pick a color",
        "parameters": {"type": "object", "properties": {"hint": {"type": "string"}}, "required": ["hint"]}}


def test_a_frontend_tool_call_ends_the_run_and_the_apps_result_continues_it(setup_env, tmp_path, stack):
    t = thread(setup_env, tmp_path, stack)
    # A plain first turn: the session exists before the app declares its tool, so the tool
    # reaches the agent the bridge already holds (ResumeAgent), not a new one.
    assert finished(t.say("hello"))["outcome"] == {"type": "success"}
    sid = stack.api.call("GET", f"/v1/sessions/{t.thread_id}")[1]["session_id"]
    stack.backend.post_script({"steps": [{"text": "Asking the app."},
                                         {"tool": "pick_color", "args": {"hint": "warm"}},
                                         {"textFromLastTool": "The app said: "}]})
    t.cmd(op="user", text="pick a color")
    out = t.run(tools=[PICK])
    assert out["ok"], out
    ts = types(out)
    assert ts[-4:] == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "RUN_FINISHED"], ts
    start = out["raw"][-4]
    assert start["toolCallName"] == "pick_color" and json.loads(out["raw"][-3]["delta"]) == {"hint": "warm"}
    end = finished(out)
    assert end["outcome"] == {"type": "success", "pendingToolCallIds": [start["toolCallId"]]}, end
    assert "TOOL_CALL_RESULT" not in ts
    # The Cursor run waits, holding the call; a new user message meanwhile is refused, naming it.
    status, body = stack.api.call("POST", "/v1/ag-ui", {
        "threadId": t.thread_id, "runId": "r-x", "messages": [{"id": "u", "role": "user", "content": "hi"}]})
    assert status == 409 and start["toolCallId"] in body["detail"], body
    # A result for a call that does not wait is refused.
    status, body = stack.api.call("POST", "/v1/ag-ui", {
        "threadId": t.thread_id, "runId": "r-y",
        "messages": [{"id": "tm", "role": "tool", "toolCallId": "toolu_nope", "content": "x"}]})
    assert status == 409 and "toolu_nope" in body["detail"], body
    # The app answers with a tool message: the same Cursor run goes on with it.
    t.cmd(op="tool", toolCallId=start["toolCallId"], content="crimson")
    out2 = t.run(tools=[PICK])
    assert out2["ok"], out2
    ts2 = types(out2)
    # The app's own tool message is the result: no second copy of it.
    assert "TOOL_CALL_RESULT" not in ts2 and ts2[0] == "RUN_STARTED", ts2
    text = "".join(e["delta"] for e in out2["raw"] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert "The app said: crimson" in text, out2["raw"]
    assert finished(out2)["outcome"] == {"type": "success"}, out2["raw"]
    status, page = stack.api.call("GET", f"/v1/sessions/{sid}/runs")
    assert len(page["runs"]) == 2, page
    # Answered once: a second result for it is refused.
    status, body = stack.api.call("POST", "/v1/ag-ui", {
        "threadId": t.thread_id, "runId": "r-z",
        "messages": [{"id": "tm2", "role": "tool", "toolCallId": start["toolCallId"], "content": "x"}]})
    assert status == 409, body
    t.close()


def test_frontend_tools_on_a_new_thread_and_names_callbackd_serves_are_refused(setup_env, tmp_path, stack):
    t = thread(setup_env, tmp_path, stack)
    t.cmd(op="user", text="pick")
    bad = t.run(tools=[{**PICK, "name": "deploy"}])
    assert not bad["ok"] and bad["status"] == 400 and "tools[0].name" in problem(bad)["detail"], bad
    assert stack.api.call("GET", "/v1/sessions")[1]["sessions"] == [], "a refused input started a session"
    stack.backend.post_script({"steps": [{"tool": "pick_color", "args": {"hint": "cold"}},
                                         {"textFromLastTool": "Got: "}]})
    t.cmd(op="user", text="pick")
    out = t.run(tools=[PICK])
    assert out["ok"], out
    end = finished(out)
    [call] = end["outcome"]["pendingToolCallIds"]
    t.cmd(op="tool", toolCallId=call, content="teal")
    out2 = t.run(tools=[PICK])
    assert out2["ok"], out2
    assert "Got: teal" in "".join(e["delta"] for e in out2["raw"] if e["type"] == "TEXT_MESSAGE_CONTENT")
    t.close()


def test_an_unanswered_frontend_call_fails_after_the_question_timeout(setup_env, tmp_path):
    s = ApiStack(setup_env, tmp_path, scenario="text",
                 config="[tools.limits.ask_user]\napproval_timeout_ms = 1500\n")
    try:
        t = thread(setup_env, tmp_path, s)
        s.backend.post_script({"steps": [{"tool": "pick_color", "args": {"hint": "any"}},
                                         {"textFromLastTool": "Got: "}]})
        t.cmd(op="user", text="pick")
        out = t.run(tools=[PICK])
        [call] = finished(out)["outcome"]["pendingToolCallIds"]
        sid = s.api.call("GET", f"/v1/sessions/{t.thread_id}")[1]["session_id"]
        [run] = s.api.call("GET", f"/v1/sessions/{sid}/runs")[1]["runs"]
        # Nobody answers: after the timeout the model is told, and the Cursor run ends.
        c, r = s.api.open("GET", f"/v1/runs/{run['run_id']}/stream")
        rest = events(read_all(r, limit=60))
        c.close()
        tool = [e for e in rest if e["type"] == "tool_completed"][0]
        assert tool["tool_call_id"] == call, tool
        assert rest[-1]["type"] == "completed" and "did not return a result" in rest[-1]["output"], rest[-1]
        # The late result is refused: the call no longer waits.
        status, body = s.api.call("POST", "/v1/ag-ui", {
            "threadId": t.thread_id, "runId": "r-late",
            "messages": [{"id": "tm", "role": "tool", "toolCallId": call, "content": "late"}]})
        assert status == 409 and call in body["detail"], body
        t.close()
    finally:
        s.stop()


def test_bad_input_is_refused_with_the_reason(setup_env, tmp_path, stack):
    api = stack.api
    ok = {"threadId": "t-bad", "runId": "r", "messages": [{"id": "u", "role": "user", "content": "hi"}]}
    for body, code, says in [
        ({"runId": "r", "messages": []}, 400, "threadId"),
        ({"threadId": "t", "runId": "r", "messages": "hi"}, 400, "messages must be a list"),
        ({"threadId": "t", "runId": "r", "messages": []}, 400, "neither a new user message"),
        ({**ok, "resume": [{"interruptId": "appr_nope", "status": "resolved", "payload": {"approved": True}}]},
         409, "no interrupt"),
    ]:
        status, problem = api.call("POST", "/v1/ag-ui", body)
        assert status == code and says in problem["detail"], (body, status, problem)
    # No token: 401; nothing was started.
    import http.client
    c = http.client.HTTPConnection(api.host, api.port, timeout=30)
    c.request("POST", "/v1/ag-ui", json.dumps(ok), {"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 401, r.status
    c.close()
    status, sessions = api.call("GET", "/v1/sessions")
    assert sessions["sessions"] == [], sessions
    # Through the official client, a refusal is an error with the problem.
    t = thread(setup_env, tmp_path, stack)
    out = t.run()
    assert not out["ok"] and out["status"] == 400, out
    t.close()


def test_the_example_chat_asks_the_person_and_the_approved_tool_runs(setup_env, tmp_path, stack):
    d = tmp_path / "example"
    d.mkdir()
    shutil.copy(HERE.parent.parent / "examples" / "ag_ui" / "chat.mjs", d / "chat.mjs")
    (d / "node_modules").symlink_to(node_modules())
    stack.backend.post_script(deploy_script("prod"))
    # The person types a message, approves, then ends the chat (stdin closes).
    out = subprocess.run([setup_env["NODE"], str(d / "chat.mjs"), "--url", stack.run.daemon_ready["url"],
                          "--token", stack.api.token, "--thread", "example-thread"],
                         input="deploy to prod\ny\n", capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "approve? [y/N]" in out.stdout and "Result: deployed-prod" in out.stdout, out.stdout
    assert runs(tmp_path) == 1
    status, session = stack.api.call("GET", "/v1/sessions/example-thread")
    assert status == 200, session
