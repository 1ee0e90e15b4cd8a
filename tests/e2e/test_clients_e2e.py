"""Issue 20: the typed clients (clients/typescript, in Node and in Chromium on a page of another origin
than the daemon's, and clients/python)
follow live runs of the real bridge through a proxy that cuts their connections mid-event, and deliver every durable seq
exactly once, byte-equal to a replay, then stop at the run's end. Also: ReplayExpired on 410, and
each client's generated types equal to what the live daemon's OpenAPI document generates.
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path

import callbackd_client
import harness as h
from faultproxy import FaultProxy
from test_console_e2e import Browser, browser_env  # noqa: F401 (a fixture)
from test_eventsource_e2e import page_server
from test_run_api_e2e import ApiStack, durable, read_all

REPO = Path(__file__).resolve().parent.parent.parent
TS = REPO / "clients" / "typescript"
PY = REPO / "clients" / "python"
HERE = Path(__file__).resolve().parent
# Events without an `id:` line: never stored, so not part of the replay.
NOT_DURABLE = {"token", "up_to_date", "reconnect", "stream_gap", "approval_required", "approval_resolved"}

# A tool that sleeps keeps the run live while its streams are cut; short keepalives and a short
# stream lifetime put keepalives and `reconnect` events between the cuts.
CONFIG = """
[api]
cors_origins = ["http://127.0.0.1:{page_port}"]
keepalive_ms = 200
max_stream_ms = 1500
retry_ms = 50
[[tools.command]]
name = "slow"
description = "Sleeps, then answers"
argv = ["sh", "-c", "sleep 2; echo '{{\\"slept\\": 2}}'"]
timeout_ms = 30000
"""


def stack(setup_env, tmp_path, page_port: int) -> ApiStack:
    """The daemon, which lets pages of `page_port`'s origin call it (CORS)."""
    return ApiStack(setup_env, tmp_path, scenario="tool", config=CONFIG.format(page_port=page_port),
                    backend_env={"FB_TOOL_NAME": "slow", "FB_TOOL_ARGS": "{}"})


def replay(s: ApiStack, run_id: str) -> list[tuple[int, str]]:
    c, r = s.api.open("GET", f"/v1/runs/{run_id}/stream")
    out = durable(read_all(r))
    c.close()
    return out


def assert_exactly_once(events: list[dict], s: ApiStack, after: int = 0) -> str:
    """Every durable event after `after` once, in order, each the replay's bytes; the last one
    terminal. Returns the run id."""
    assert events, "the client yielded nothing"
    run_id = events[-1]["run_id"]
    assert events[-1]["type"] in ("completed", "error"), events[-1]
    got = [e for e in events if e["type"] not in NOT_DURABLE]
    want = [(i, raw) for i, raw in replay(s, run_id) if i > after]
    assert [e["seq"] for e in got] == [i for i, _ in want], ([e["seq"] for e in got], [i for i, _ in want])
    # serde_json's compact form: keys in the server's order, nothing escaped beyond JSON's need.
    assert [json.dumps(e, separators=(",", ":"), ensure_ascii=False) for e in got] == [raw for _, raw in want]
    return run_id


def ts_client(setup_env, *args: str, timeout: float = 120) -> tuple[int, list[dict]]:
    out = subprocess.run([setup_env["NODE"], str(HERE / "ts_client_follow.mjs"), *args],
                         capture_output=True, text=True, timeout=timeout)
    assert out.returncode in (0, 3), out.stderr
    return out.returncode, [json.loads(line) for line in out.stdout.splitlines()]


# Runs in the page: loads the TypeScript client from its sources (blob URLs stand in for the
# files) and sends a message. The page is served from another origin than the daemon's, which
# it reaches through the fault proxy: every call is a cross-origin fetch (CORS, with the
# Authorization header's preflight).
IN_BROWSER = """async () => {
  if (new URL(%(base)s).origin === location.origin) throw new Error("the page is on the API's origin");
  const js = (text) => URL.createObjectURL(new Blob([text], { type: "text/javascript" }));
  const sse = js(%(sse)s);
  const { Client } = await import(js(%(index)s.replace('"./sse.js"', JSON.stringify(sse))));
  const client = new Client({ baseUrl: %(base)s, token: %(token)s });
  const out = [];
  for await (const ev of client.sendMessage(%(sid)s, "call slow from the browser")) out.push(ev);
  return out;
}"""


def test_both_clients_follow_live_runs_through_cut_connections(setup_env, browser_env, tmp_path):
    page = page_server(tmp_path)
    s = stack(setup_env, tmp_path, page.server_port)
    port = int(s.api.url.rsplit(":", 1)[1].split("/", 1)[0])
    sid = s.session()

    # TypeScript, sendMessage: the POST's own stream is cut too, then GET ?after= resumes it.
    proxy = FaultProxy(port, cuts=8)
    rc, events = ts_client(setup_env, proxy.url, s.api.token, "send", sid, "call slow")
    assert rc == 0, events
    run1 = assert_exactly_once(events, s)
    # The cuts fell inside events (never after a whole one), live and in replays.
    assert len(proxy.cut_log) >= 3 and all(b"\n\n" not in cut for cut in proxy.cut_log), proxy.cut_log
    proxy.close()

    # Python, send_message, blocking client: a second turn of the same session.
    proxy = FaultProxy(port, cuts=8, seed=21)
    with callbackd_client.Client(proxy.url, s.api.token) as api:
        events2 = list(api.send_message(sid, "call slow again"))
        run2 = assert_exactly_once(events2, s)
        assert run2 != run1 and len(proxy.cut_log) >= 3, proxy.cut_log
        assert api.get_run(run2)["status"] == "finished"
    proxy.close()

    # TypeScript in Chromium, the page on another origin (CORS): fetch's body streams, cut the
    # same way.
    proxy = FaultProxy(port, cuts=6, seed=23)
    b = Browser(browser_env, tmp_path)
    try:
        b("goto", url=f"http://127.0.0.1:{page.server_port}/index.html")
        js = IN_BROWSER % {"sse": json.dumps((TS / "src" / "sse.js").read_text()),
                           "index": json.dumps((TS / "src" / "index.js").read_text()),
                           "base": json.dumps(proxy.url), "token": json.dumps(s.api.token),
                           "sid": json.dumps(sid)}
        events3 = b("eval", js=js)
        run3 = assert_exactly_once(events3, s)
        assert run3 not in (run1, run2) and len(proxy.cut_log) >= 3, proxy.cut_log
    finally:
        b.close()
        page.shutdown()
    proxy.close()

    # Replays of finished runs with cuts: the async Python client and the TypeScript followRun.
    proxy = FaultProxy(port, cuts=4, max_events=2, seed=22)

    async def follow() -> list[dict]:
        async with callbackd_client.AsyncClient(proxy.url, s.api.token) as api:
            return [dict(e) async for e in api.follow_run(run1)]

    assert_exactly_once(asyncio.run(follow()), s)
    rc, events = ts_client(setup_env, proxy.url, s.api.token, "follow", run2, "3")
    assert rc == 0 and events[0]["seq"] == 4, events
    assert_exactly_once(events, s, after=3)
    assert len(proxy.cut_log) >= 2, proxy.cut_log
    # Nothing after the last seq of a finished run: 204, and both iterations end empty.
    last = replay(s, run2)[-1][0]
    assert ts_client(setup_env, proxy.url, s.api.token, "follow", run2, str(last)) == (0, [])
    with callbackd_client.Client(proxy.url, s.api.token) as api:
        assert list(api.follow_run(run2, after=last)) == []
    proxy.close()

    # Retention removes the events: 410, a typed error in both.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:   # prune goes by run documents, marked finished a bit later
        with h.DB(s.db) as db:
            if [d["status"] for d in db.run_docs(sid)] == ["finished"] * 3:
                break
        time.sleep(0.05)
    out = subprocess.run([str(h.callbackd_bin()), "prune", "--db", str(s.db), "--older-than", "0s"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rc, events = ts_client(setup_env, s.api.url, s.api.token, "follow", run1)
    assert rc == 3 and events == [{"error": "ReplayExpiredError", "status": 410, "code": "replay_expired",
                                   "message": events[0]["message"]}], events
    with callbackd_client.Client(s.api.url, s.api.token) as api:
        try:
            list(api.follow_run(run1))
            raise AssertionError("follow_run of a pruned run did not raise")
        except callbackd_client.ReplayExpired as e:
            assert e.status == 410 and e.code == "replay_expired" and e.detail


def test_generated_types_match_the_live_document(setup_env, tmp_path):
    """Both clients' checked-in types are what the daemon's own /v1/openapi.json generates: when
    the API changes, this fails until `npm run gen` / `python gen_types.py` are run again."""
    db = tmp_path / "data" / "callbackd.db"
    db.parent.mkdir(parents=True)
    daemon = h.Callbackd(tmp_path, db).start()
    url = daemon.url
    out = subprocess.run([os.environ.get("E2E_PYTHON") or "python3", str(PY / "gen_types.py"), "--check", url],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    modules = os.environ.get("CALLBACKD_TS_NODE_MODULES") or str(TS / "node_modules")
    out = subprocess.run([setup_env["NODE"], str(TS / "scripts" / "gen.mjs"), "--check", url], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "CALLBACKD_TS_NODE_MODULES": modules})
    assert out.returncode == 0, out.stderr + out.stdout
