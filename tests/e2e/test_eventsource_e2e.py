"""Issue 20: Chromium's native EventSource, on a page of another origin (CORS), follows a live
run of the real bridge with a stream token through connections a fault proxy keeps cutting,
and gets every durable seq exactly once, byte-equal to a replay, then stops.
"""
from __future__ import annotations

import http.server
import json
import threading
import time

from test_console_e2e import Browser, Proxy, browser_env  # noqa: F401 (a fixture)
from test_run_api_e2e import ApiStack, durable, frames, read_all

CONFIG = """
[api]
retry_ms = 150
cors_origins = ["http://127.0.0.1:{page_port}"]
[[tools.command]]
name = "slow"
description = "Sleeps, then answers"
argv = ["sh", "-c", "sleep 8; echo '{{\\"slept\\": 8}}'"]
timeout_ms = 20000
"""

CONTROL = {"token", "up_to_date", "reconnect", "stream_gap", "approval_required", "approval_resolved"}


def page_server(tmp) -> http.server.ThreadingHTTPServer:
    (tmp / "page").mkdir()
    (tmp / "page" / "index.html").write_text("<!doctype html><title>another origin</title><p>app</p>")

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **k):
            super().__init__(*a, directory=str(tmp / "page"), **k)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_native_eventsource_follows_a_run_with_a_stream_token_through_drops(setup_env, browser_env, tmp_path):
    page = page_server(tmp_path)
    s = ApiStack(setup_env, tmp_path, scenario="tool", config=CONFIG.format(page_port=page.server_port),
                 backend_env={"FB_TOOL_NAME": "slow", "FB_TOOL_ARGS": "{}"})
    b = None
    proxy = None
    try:
        sid = s.session()
        c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": "call slow"})
        run_id = None
        for kind, _, d, _ in frames(r):
            if kind == "event" and d["type"] == "run_started":
                run_id = d["run_id"]
                break
        assert run_id
        threading.Thread(target=lambda: read_all(r, limit=120), daemon=True).start()
        proxy = Proxy(s.api.port)
        b = Browser(browser_env, tmp_path)
        b("goto", url=f"http://127.0.0.1:{page.server_port}/index.html")
        base = f"http://127.0.0.1:{proxy.port}/v1"
        status = b("eval", js=f"""async () => {{
            const r = await fetch("{base}/runs/{run_id}/stream-token",
                {{method: "POST", headers: {{Authorization: "Bearer {s.api.token}"}}}});
            const body = await r.json();
            window.got = []; window.opens = 0; window.errors = 0; window.done = false;
            const es = new EventSource(
                "{base}/runs/{run_id}/stream?after=0&access_token=" + encodeURIComponent(body.token));
            es.onopen = () => {{ window.opens++; }};
            es.onerror = () => {{ window.errors++; }};
            es.onmessage = (m) => {{
                window.got.push({{id: m.lastEventId, data: m.data}});
                const t = JSON.parse(m.data).type;
                if (t === "completed" || t === "error") {{ window.done = true; es.close(); }}
            }};
            return r.status;
        }}""")
        assert status == 200
        # Cut every connection through the proxy, again and again, until the run has ended.
        drops = 0
        deadline = time.monotonic() + 90
        while not b("eval", js="() => window.done") and time.monotonic() < deadline:
            time.sleep(0.3)
            proxy.down()
            proxy.back(s.api.port)
            drops += 1
        assert b("eval", js="() => window.done"), b("eval", js="() => window.got")
        got = b("eval", js="() => window.got")
        opens = b("eval", js="() => window.opens")
        assert drops >= 3 and opens >= 2, (drops, opens)
        mine = [(int(g["id"]), g["data"]) for g in got if json.loads(g["data"])["type"] not in CONTROL]
        c2, r2 = s.api.open("GET", f"/v1/runs/{run_id}/stream")
        replay = durable(read_all(r2))
        c2.close()
        assert mine == replay, (mine, replay)
        assert [seq for seq, _ in mine] == list(range(1, len(replay) + 1))
    finally:
        if b:
            b.close()
        if proxy:
            proxy.close()
        page.shutdown()
        s.stop()
