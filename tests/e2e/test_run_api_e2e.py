"""Issue 9, end to end: the run API (`/v1`) of `callbackd run -- <real bridge>` against the fake
backend: typed sequences of the scenarios, byte-equal replay, tokens, a slow tool with
keepalives, a timed-out tool as tool_outcome_unknown, a dropped client that does not cancel,
cancel, a daemon restart mid-run, and the standard-library client example.
"""
from __future__ import annotations

import http.client
import json
import re
import signal
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import harness as h

REPO = Path(__file__).resolve().parent.parent.parent


class Api:
    def __init__(self, url: str, token: str):
        self.url = url.rstrip("/")
        host, port = self.url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
        self.host, self.port, self.token = host, int(port), token

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        c = http.client.HTTPConnection(self.host, self.port, timeout=60)
        c.request(method, path, json.dumps(body) if body is not None else None,
                  {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        r = c.getresponse()
        raw = r.read()
        c.close()
        return r.status, (json.loads(raw) if raw else {})

    def open(self, method: str, path: str, body: dict | None = None):
        c = http.client.HTTPConnection(self.host, self.port, timeout=60)
        c.request(method, path, json.dumps(body) if body is not None else None,
                  {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        return c, c.getresponse()


def frames(resp, stop=None, limit: float = 60):
    """Yields (kind, id, data, raw) for each SSE block: kind 'event' or 'comment'."""
    deadline = time.monotonic() + limit
    ident, data = None, None
    while time.monotonic() < deadline:
        line = resp.readline()
        if not line:
            return
        line = line.decode().rstrip("\n")
        if line.startswith(":"):
            yield "comment", None, line[1:].strip(), line
        elif line.startswith("id: "):
            ident = int(line[4:])
        elif line.startswith("data: "):
            data = line[6:]
        elif line == "" and data is not None:
            yield "event", ident, json.loads(data), data
            ident, data = None, None
    raise TimeoutError("stream did not end in time")


def read_all(resp, limit: float = 60) -> list[tuple]:
    return list(frames(resp, limit=limit))


def durable(fs) -> list[tuple[int, str]]:
    return [(i, raw) for kind, i, _, raw in fs if kind == "event" and i is not None]


def types(fs) -> list[str]:
    return [d["type"] for kind, _, d, _ in fs if kind == "event"]


class ApiStack:
    def __init__(self, env, tmp: Path, scenario: str = "auto", config: str = "", backend_env: dict | None = None):
        self.env, self.tmp = env, tmp
        self.backend = h.FakeBackend(env, tmp, scenario, extra_env=backend_env)
        self.db = tmp / "data" / "callbackd.db"
        self.db.parent.mkdir(parents=True, exist_ok=True)
        self.config = tmp / "callbackd.toml"
        self.config.write_text(config)
        self.ws = tmp / "ws"
        self.start()

    def start(self, listen: str = "127.0.0.1:0"):
        self.run = h.CallbackdRun(self.env, self.tmp, self.ws, self.backend, self.db, h.rand_token(), h.rand_token(),
                                  listen=listen, extra_args=["--config", str(self.config)])
        tokens = tomllib.loads((self.db.parent / "callbackd.tokens").read_text())
        assert self.run.daemon_ready["api_url"].endswith("/v1")
        self.api = Api(self.run.daemon_ready["url"], tokens["api_token"])
        return self

    def stop(self):
        self.run.proc.stop()

    def session(self) -> str:
        status, body = self.api.call("POST", "/v1/sessions", {})
        assert status == 201, body
        return body["session"]["session_id"]


def test_a_tool_turn_streams_typed_events_tokens_and_replays_byte_equal(setup_env, tmp_path):
    s = ApiStack(setup_env, tmp_path)
    sid = s.session()
    status, sess = s.api.call("GET", f"/v1/sessions/{sid}")
    assert status == 200 and sess["cwd"] == str(s.ws)
    c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": "please call the echo tool"})
    assert r.status == 200 and r.getheader("content-type") == "text/event-stream"
    live = read_all(r)
    c.close()
    ts = types(live)
    assert [t for t in ts if t not in ("token", "up_to_date")] == [
        "run_started", "step", "message_snapshot", "tool_started", "tool_completed", "message_snapshot",
        "usage", "completed"], ts
    # Tokens come before the snapshot that replaces them and carry no id.
    assert ts.index("token") < ts.index("message_snapshot")
    for kind, i, d, _ in live:
        if kind == "event" and d["type"] == "token":
            assert i is None and d["delta"] >= 1
    snaps = [d for kind, _, d, _ in live if kind == "event" and d["type"] == "message_snapshot"]
    assert snaps[0]["delta"] >= 1 and snaps[0]["text"] == "Calling the echo tool."
    # Each snapshot's delta is exactly the number of tokens sent since the previous one.
    since = 0
    for kind, _, d, _ in live:
        if kind == "event" and d["type"] == "token":
            since += 1
            assert d["delta"] == since, live
        elif kind == "event" and d["type"] == "message_snapshot":
            assert d["delta"] == since, live
            since = 0
    done = [d for kind, _, d, _ in live if kind == "event" and d["type"] == "completed"][0]
    assert done["status"] == "finished" and "ping" in done["output"]
    tool = [d for kind, _, d, _ in live if kind == "event" and d["type"] == "tool_completed"][0]
    assert tool["tool"] == "echo" and tool["outcome"] == "ok"
    run_id = done["run_id"]
    ids = [i for i, _ in durable(live)]
    assert ids == list(range(1, len(ids) + 1))
    # A replay after completion sends exactly the bytes the live stream sent (deltas included).
    c, r = s.api.open("GET", f"/v1/runs/{run_id}/stream")
    replay = read_all(r)
    c.close()
    assert durable(replay) == durable(live)
    status, state = s.api.call("GET", f"/v1/runs/{run_id}")
    assert status == 200 and state["status"] == "finished" and state["last_seq"] == ids[-1]
    # The state says what the stream's `completed` said (issue 20).
    assert state["output"] == done["output"] and state["usage"] == done["usage"], state
    assert state["error"] is None
    assert [t["tool"] for t in state["tool_calls"]] == ["echo"] and state["tool_calls"][0]["outcome"] == "ok"
    # A second message right after the first: the previous turn settles, no 409.
    c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": "again, the echo tool"})
    assert r.status == 200, r.read()
    assert types(read_all(r))[-1] == "completed"
    c.close()
    status, runs = s.api.call("GET", f"/v1/sessions/{sid}/runs")
    assert [r["status"] for r in runs["runs"]] == ["finished", "finished"]
    # `callbackd prune`, while the daemon runs: the run's events go, its state stays, and a
    # replay that needs them is 410. (Prune goes by the run documents, which the bridge marks
    # finished 10-60 ms after the stream's `completed`: wait for that.)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with h.DB(s.db) as db:
            if [d["status"] for d in db.run_docs(sid)] == ["finished", "finished"]:
                break
        time.sleep(0.05)
    out = subprocess.run([str(h.callbackd_bin()), "prune", "--db", str(s.db), "--older-than", "0s"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "pruned the events of 2 runs" in out.stdout, out.stdout
    c, r = s.api.open("GET", f"/v1/runs/{run_id}/stream")
    assert r.status == 410 and json.loads(r.read())["code"] == "replay_expired"
    c.close()
    status, state = s.api.call("GET", f"/v1/runs/{run_id}")
    assert status == 200 and state["status"] == "finished" and state["events_expired_through"] == ids[-1]


def test_thinking_and_error_scenarios(setup_env, tmp_path):
    s = ApiStack(setup_env, tmp_path / "t", scenario="thinking")
    sid = s.session()
    c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": "think"})
    fs = read_all(r)
    steps = [d for kind, _, d, _ in fs if kind == "event" and d["type"] == "step"]
    assert [st["kind"] for st in steps] == ["status", "thinking", "thinking"], steps
    assert steps[1]["text"] == "Let me think about this." and [st["index"] for st in steps] == [1, 2, 3]
    s.stop()
    s = ApiStack(setup_env, tmp_path / "e", scenario="error")
    sid = s.session()
    c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": "fail please"})
    fs = read_all(r, limit=90)
    last = [d for kind, _, d, _ in fs if kind == "event"][-1]
    assert last["type"] == "error" and last["status"] == "error"
    assert "rate limited" in last["problem"]["detail"] and last["problem"]["code"] == "resource_exhausted"
    # The failed run's state carries the stream's problem, before and after the bridge has
    # updated the run document (which holds only an error code).
    for _ in range(2):
        status, state = s.api.call("GET", f"/v1/runs/{last['run_id']}")
        assert status == 200 and state["status"] == "error" and state["error"] == last["problem"], state
        time.sleep(0.5)


def test_a_turn_the_backend_fails_after_its_tool_ends_in_error(setup_env, tmp_path):
    """toolerror: the backend fails after the tool call; the bridge retries the whole turn
    (4 attempts, tool included) and ends the run ERROR with its failure text."""
    s = ApiStack(setup_env, tmp_path, scenario="toolerror")
    sid = s.session()
    c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": "call the echo tool"})
    fs = read_all(r, limit=120)
    c.close()
    evs = [d for k, _, d, _ in fs if k == "event"]
    assert [e["type"] for e in evs].count("tool_started") == 4, [e["type"] for e in evs]
    last = evs[-1]
    assert last["type"] == "error" and last["problem"]["detail"], last
    ids = [i for i, _ in durable(fs)]
    assert ids == list(range(1, len(ids) + 1))


SLOW = """
[api]
keepalive_ms = 300
[[tools.command]]
name = "slow"
description = "Sleeps, then answers"
argv = ["sh", "-c", "sleep {secs}; echo '{{\\"slept\\": {secs}}}'"]
timeout_ms = {timeout}
"""


def test_slow_tool_keepalive_timeout_is_outcome_unknown(setup_env, tmp_path):
    s = ApiStack(setup_env, tmp_path, scenario="tool", config=SLOW.format(secs=3, timeout=1200),
                 backend_env={"FB_TOOL_NAME": "slow", "FB_TOOL_ARGS": "{}"})
    sid = s.session()
    c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": "call slow"})
    fs = read_all(r, limit=90)
    kinds = [(k, d if k == "comment" else d["type"]) for k, _, d, _ in fs]
    started = kinds.index(("event", "tool_started"))
    unknown = kinds.index(("event", "tool_outcome_unknown"))
    assert ("comment", "keepalive") in kinds[started:unknown], kinds
    ev = [d for k, _, d, _ in fs if k == "event" and d["type"] == "tool_outcome_unknown"][0]
    assert ev["tool"] == "slow" and "timeout" in ev["reason"]
    run_id = ev["run_id"]
    status, state = s.api.call("GET", f"/v1/runs/{run_id}")
    call = state["tool_calls"][0]
    assert call["tool"] == "slow" and call["outcome"] == "timeout" and call["cut_off"] is True


def test_a_run_started_by_another_client_has_its_prompt_live_and_replayed(setup_env, tmp_path):
    """Issue 35 item 4: a run started through the bridge directly (like the Python SDK) gets
    its `input` from its stored `user` event (the backend's user_message_appended, which
    GetRunConversation folds too): the live reader's `run_started` and the replay's are the
    same bytes, and the run's state says it."""
    prompt = "please call slow, from another client"
    s = ApiStack(setup_env, tmp_path, scenario="tool", config=SLOW.format(secs=1, timeout=30000),
                 backend_env={"FB_TOOL_NAME": "slow", "FB_TOOL_ARGS": "{}", "FB_ECHO_USER": "1"})
    bridge = s.run.client
    aid = bridge.create_agent(s.ws, custom_tools={"slow": {"description": "Sleeps", "inputSchema": {"type": "object"}}})
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("r", bridge.send(aid, prompt, timeout=120)), daemon=True)
    t.start()
    run_id, deadline = None, time.monotonic() + 30
    while run_id is None and time.monotonic() < deadline:
        _, body = s.api.call("GET", f"/v1/sessions/{aid}/runs")
        run_id = body["runs"][0]["run_id"] if body.get("runs") else None
        time.sleep(0.02)
    assert run_id, "the bridge's run never appeared"
    c, r = s.api.open("GET", f"/v1/runs/{run_id}/stream")
    live = read_all(r)
    c.close()
    t.join(timeout=120)
    assert result["r"][1]["status"] == "RUN_LIFECYCLE_STATUS_FINISHED", result
    started = [d for kind, _, d, _ in live if kind == "event" and d["type"] == "run_started"]
    assert started and started[0]["input"] == {"text": prompt}, live
    assert types(live)[-1] == "completed", types(live)
    c, r = s.api.open("GET", f"/v1/runs/{run_id}/stream")
    replay = read_all(r)
    c.close()
    assert durable(replay) == durable(live)
    status, run = s.api.call("GET", f"/v1/runs/{run_id}")
    assert status == 200 and run["input"] == {"text": prompt}, run
    _, listed = s.api.call("GET", f"/v1/sessions/{aid}/runs")
    assert listed["runs"][0]["input"] == {"text": prompt}, listed


def test_a_dropped_client_does_not_cancel_and_cancel_does(setup_env, tmp_path):
    s = ApiStack(setup_env, tmp_path, scenario="tool", config=SLOW.format(secs=2, timeout=30000),
                 backend_env={"FB_TOOL_NAME": "slow", "FB_TOOL_ARGS": "{}"})
    sid = s.session()
    # 1. Drop the POST stream at tool_started; resume with GET ?after and see the run finish.
    c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": "call slow"})
    seen, run_id = [], None
    for kind, i, d, _ in frames(r):
        if kind == "event":
            run_id = d["run_id"]
            if i is not None:
                seen.append(i)
            if d["type"] == "tool_started":
                break
    c.close()
    c, r = s.api.open("GET", f"/v1/runs/{run_id}/stream?after={seen[-1]}")
    rest = read_all(r, limit=60)
    c.close()
    assert [i for i, _ in durable(rest)][0] == seen[-1] + 1
    assert types(rest)[-1] == "completed"
    assert [d for k, _, d, _ in rest if k == "event"][-1]["status"] == "finished"
    # 2. Cancel a run while its tool runs.
    c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": "call slow again"})
    for kind, i, d, _ in frames(r):
        if kind == "event" and d["type"] == "tool_started":
            run_id = d["run_id"]
            break
    status, body = s.api.call("POST", f"/v1/runs/{run_id}/cancel")
    assert status == 202, body
    rest = read_all(r, limit=30)
    c.close()
    last = [d for k, _, d, _ in rest if k == "event"][-1]
    assert last["type"] == "completed" and last["status"] == "cancelled", rest
    status, body = s.api.call("POST", f"/v1/runs/{run_id}/cancel")
    assert status == 409 and body["code"] == "failed_precondition"
    time.sleep(2.5)  # the bridge does not abort the host's tool: it runs to its end
    status, state = s.api.call("GET", f"/v1/runs/{run_id}")
    # Its answer was dropped with the run: cancelled, in the state as in the stream (issue 35).
    assert state["status"] == "cancelled" and state["tool_calls"][0]["outcome"] == "cancelled", state


def test_daemon_restart_mid_run_and_the_stream_resumes_from_the_store(setup_env, tmp_path):
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    s = ApiStack.__new__(ApiStack)
    s.env, s.tmp = setup_env, tmp_path
    s.backend = h.FakeBackend(setup_env, tmp_path, "tool",
                              extra_env={"FB_TOOL_NAME": "slow", "FB_TOOL_ARGS": "{}"})
    s.db = tmp_path / "data" / "callbackd.db"
    s.db.parent.mkdir(parents=True)
    s.config = tmp_path / "callbackd.toml"
    s.config.write_text(SLOW.format(secs=2, timeout=30000))
    s.ws = tmp_path / "ws"
    # serve on a fixed port (the bridge keeps its callback URL), the bridge on its own
    store_token, tool_token = h.rand_token(), h.rand_token()
    daemon = h.Callbackd(tmp_path, s.db, store_token, tool_token,
                         extra_args=["--config", str(s.config)])
    daemon.proc = None

    def start_daemon():
        daemon.proc = h.Proc("callbackd", [h.callbackd_bin(), "serve", "--listen", f"127.0.0.1:{port}",
                                           "--db", s.db, "--config", s.config], tmp_path / "logs", cwd=tmp_path,
                             env={"CALLBACKD_STORE_TOKEN": store_token, "CALLBACKD_TOOL_TOKEN": tool_token})
        daemon.ready = json.loads(daemon.proc.wait_for_line("callbackd ready ", timeout=30))
        daemon.url = daemon.ready["url"]

    start_daemon()
    bridge = h.Bridge(setup_env, tmp_path, s.ws, s.backend, daemon)
    tools = {"slow": {"description": "Sleeps", "inputSchema": {"type": "object"}}}
    aid = bridge.client.create_agent(s.ws, custom_tools=tools)
    result = {}

    def send():
        try:
            result["r"] = bridge.client.send(aid, "call slow", timeout=120)
        except BaseException as e:      # the main thread asserts on it
            result["error"] = repr(e)

    t = threading.Thread(target=send, daemon=True)
    t.start()
    token = tomllib.loads((s.db.parent / "callbackd.tokens").read_text())["api_token"]
    api = Api(daemon.url, token)
    # The run exists once the bridge started it: find it and follow it until the tool starts.
    run_id, last = None, 0
    deadline = time.monotonic() + 30
    while run_id is None and time.monotonic() < deadline:
        st, body = api.call("GET", f"/v1/sessions/{aid}/runs")
        running = [r for r in body.get("runs", []) if r["status"] == "running"]
        run_id = running[0]["run_id"] if running else None
        time.sleep(0.05)
    c, r = api.open("GET", f"/v1/runs/{run_id}/stream")
    for kind, i, d, _ in frames(r):
        if i is not None:
            last = i
        if kind == "event" and d["type"] == "tool_started":
            break
    # Kill the daemon while the tool runs (a SIGTERM would let the call finish in the drain):
    # the stream breaks, and resumes from the store once it is back.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:   # the bridge's tool call has reached callbackd
        with h.DB(s.db) as db:
            if db.count("tool_calls"):
                break
        time.sleep(0.05)
    daemon.proc.stop(signal.SIGKILL)
    c.close()
    start_daemon()
    t.join(timeout=120)
    assert not t.is_alive(), "the bridge's Send never ended"
    assert "error" not in result, f"the bridge's Send failed: {result['error']}"
    _, run_result = result["r"]
    c, r = api.open("GET", f"/v1/runs/{run_id}/stream?after={last}")
    rest = read_all(r, limit=60)
    c.close()
    ids = [i for i, _ in durable(rest)]
    assert ids and ids[0] == last + 1 and ids == list(range(last + 1, last + 1 + len(ids)))
    evs = [d for k, _, d, _ in rest if k == "event"]
    # The run finishes (the bridge calls the tool again), and what the bridge's Send returned
    # is what the stream's terminal event says.
    assert evs[-1]["type"] == "completed" and evs[-1]["status"] == "finished", evs
    assert run_result["status"] == "RUN_LIFECYCLE_STATUS_FINISHED", run_result
    assert run_result["result"]["result"] == evs[-1]["output"], (run_result, evs[-1])
    # The call the kill cut off is recorded as cut off (outcome `cancelled`: the daemon
    # stopped while it ran, one vocabulary since issue 35), and its failed completion is
    # reported as tool_outcome_unknown, never as a plain error.
    st, state = api.call("GET", f"/v1/runs/{run_id}")
    first = state["tool_calls"][0]
    assert first["cut_off"] is True and first["outcome"] == "cancelled", json.dumps(state["tool_calls"], indent=1)
    assert not [e for e in evs if e["type"] == "tool_completed" and e["outcome"] == "error"], evs
    bridge.stop()
    daemon.proc.stop()


def test_the_client_example_resumes_after_a_killed_connection(setup_env, tmp_path):
    s = ApiStack(setup_env, tmp_path)
    out = subprocess.run([sys.executable, str(REPO / "examples" / "run_api_client.py"), "--url", s.api.url,
                          "--token", s.api.token, "--drop-after", "3", "please call the echo tool"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    seqs = [e["seq"] for e in events if e["type"] not in ("token", "up_to_date", "reconnect")]
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    assert events[-1]["type"] == "completed"
    assert "dropping the connection" in out.stderr and "1 reconnect" in out.stderr


def test_the_readme_curl_examples(setup_env, tmp_path):
    """docs/run-api.md's curl block, as written, but for the port (the test's daemon has a free one)."""
    text = (REPO / "docs" / "run-api.md").read_text()
    block = text.split("<!-- run-api-curl", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    s = ApiStack(setup_env, tmp_path)
    script = block.replace("http://127.0.0.1:7420", s.api.url)
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=s.db.parent, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr + out.stdout
    turn = (s.db.parent / "turn.sse").read_text()
    assert '"type":"completed"' in turn and '"type":"tool_started"' in turn
    # `?after=3`: the stream printed after the turn and the run state starts at seq 4.
    tail = out.stdout.split(turn, 1)[1]
    ids = [int(i) for i in re.findall(r"^(?:.*\})?id: (\d+)$", tail, re.M)]
    assert ids and ids[0] == 4, tail[:2000]
    assert '"runs":[' in tail


def test_serve_attaches_to_a_bridge_started_elsewhere_busy_session_and_bridge_down(setup_env, tmp_path):
    """`serve` with [bridge] drives a bridge it did not start; a message to a session whose run
    is active is 409; with the bridge gone, writes are 503 and reads still work."""
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    backend = h.FakeBackend(setup_env, tmp_path, "tool",
                            extra_env={"FB_TOOL_NAME": "slow", "FB_TOOL_ARGS": "{}"})
    db = tmp_path / "data" / "callbackd.db"
    db.parent.mkdir(parents=True)
    config = tmp_path / "callbackd.toml"
    slow = SLOW.format(secs=3, timeout=30000)
    config.write_text(slow)
    store_token, tool_token = h.rand_token(), h.rand_token()
    daemon = h.Callbackd(tmp_path, db, store_token, tool_token)

    def start():
        daemon.proc = h.Proc("callbackd", [h.callbackd_bin(), "serve", "--listen", f"127.0.0.1:{port}",
                                           "--db", db, "--config", config], tmp_path / "logs", cwd=tmp_path,
                             env={"CALLBACKD_STORE_TOKEN": store_token, "CALLBACKD_TOOL_TOKEN": tool_token})
        daemon.ready = json.loads(daemon.proc.wait_for_line("callbackd ready ", timeout=30))
        daemon.url = daemon.ready["url"]

    start()
    ws = tmp_path / "ws"
    bridge = h.Bridge(setup_env, tmp_path, ws, backend, daemon)
    api = Api(daemon.url, tomllib.loads((db.parent / "callbackd.tokens").read_text())["api_token"])
    status, body = api.call("POST", "/v1/sessions", {})
    assert status == 501 and body["code"] == "not_implemented" and "[bridge]" in body["detail"]
    # Attach: the bridge's URL and token file in [bridge], then a restart. No default_cwd:
    # a session created without a cwd works in the daemon's working directory (issue 24).
    daemon.proc.stop()
    config.write_text(slow + f'\n[bridge]\nurl = "{bridge.ready["url"]}"\n'
                      f'token_file = "{bridge.ready["authTokenFile"]}"\n')
    start()
    status, body = api.call("POST", "/v1/sessions", {"tools": ["slow"]})
    assert status == 201, body
    assert body["session"]["cwd"] == str(tmp_path), body
    sid = body["session"]["session_id"]
    assert body["tools"] == ["slow"]
    c, r = api.open("POST", f"/v1/sessions/{sid}/messages", {"text": "call slow"})
    for kind, _, d, _ in frames(r):
        if kind == "event" and d["type"] == "tool_started":
            run_id = d["run_id"]
            break
    status, body = api.call("POST", f"/v1/sessions/{sid}/messages", {"text": "and again"})
    assert status == 409 and body["code"] == "failed_precondition", body
    assert run_id in body["detail"] and "cancel" in body["detail"]
    rest = read_all(r, limit=60)
    c.close()
    assert types(rest)[-1] == "completed"
    # The bridge gone: writes 503, reads and streams of stored runs still work.
    bridge.stop()
    status, body = api.call("POST", "/v1/sessions", {})
    assert status == 503 and body["code"] == "unavailable", body
    status, body = api.call("POST", f"/v1/sessions/{sid}/messages", {"text": "hello?"})
    assert status == 503, body
    c, r = api.open("GET", f"/v1/runs/{run_id}/stream")
    assert types(read_all(r))[-1] == "completed"
    c.close()
    daemon.proc.stop()
