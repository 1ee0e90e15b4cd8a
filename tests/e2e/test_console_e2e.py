"""Issue 10: the web console (/ui/) in a real browser -- Debian's chromium, driven by
playwright-core through tests/e2e/browser/driver.mjs -- against `callbackd run` with the real
bridge and the fake backend: a session created and a tool turn sent from the page, the tool row
and the final text seen; the daemon restarted in the middle of a slow tool call and the view
resuming with exactly the run's rows (none repeated, none missing); a cancel mid tool call; a
wrong token asked again; send and cancel hidden for the read-only token; 360 px wide; a run
whose events retention removed (410). Screenshots go to <tmp_path>/screenshots.
"""
from __future__ import annotations

import contextlib
import http.client
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

import harness as h

HERE = Path(__file__).resolve().parent
API_TOKEN = "console-test-api-token-0123456789abcdef"
READ_TOKEN = "console-test-read-token-0123456789abcdef"
SLOW_SECONDS = 4
CONFIG = f'''
[[tools.command]]
name = "slow"
description = "Waits {SLOW_SECONDS} seconds, then answers"
input_schema = {{ type = "object" }}
argv = ["sh", "-c", "sleep {SLOW_SECONDS}; echo '{{\\"slept\\": {SLOW_SECONDS}}}'"]
timeout_ms = 30000

[[tools.command]]
name = "guarded"
description = "Answers at once, once a person approved the call"
input_schema = {{ type = "object" }}
argv = ["sh", "-c", "echo ran >> '__MARKER__'; echo '{{\\"done\\": true}}'"]
approval = "always"
'''


@pytest.fixture(scope="module")
def browser_env() -> dict:
    """Debian's chromium and playwright-core (tests/e2e/browser/setup.sh: apt-get and npm ci)."""
    out = subprocess.run(["bash", str(HERE / "browser" / "setup.sh")], check=True, stdout=subprocess.PIPE,
                         timeout=900).stdout.decode()
    env = {}
    for line in out.splitlines():
        if line.startswith("export "):
            k, _, v = line[len("export "):].partition("=")
            env[k] = shlex.split(v)[0]
    return env


class Browser:
    """driver.mjs: one JSON command per line on stdin, one JSON answer per line on stdout."""

    def __init__(self, env: dict, workdir: Path):
        self.user_data = workdir / "chromium-profile"          # fresh for every test
        self.user_data.mkdir(parents=True)
        logs = workdir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        self.err = open(logs / "browser.err", "wb")
        self.popen = subprocess.Popen(["node", str(HERE / "browser" / "driver.mjs"), str(self.user_data), "1000", "780"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                                      env={**os.environ, **env}, start_new_session=True, text=True)

    def __call__(self, op: str, **args):
        self.popen.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.popen.stdin.flush()
        line = self.popen.stdout.readline()
        if not line:
            raise RuntimeError(f"the browser driver died during {op}: see {self.err.name}")
        answer = json.loads(line)
        if not answer["ok"]:
            raise AssertionError(f"browser {op} {args}: {answer['error']}\nbrowser log: {answer.get('log')}")
        return answer["value"]

    def close(self):
        try:
            self("close")
        except Exception:
            pass
        try:
            self.popen.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=10)
        self.err.close()


class Proxy:
    """The browser's way to the daemon: a TCP relay on 127.0.0.1 with a fixed port, so the
    console keeps one URL across daemon restarts (as behind any fixed address), and so the
    test can drop every connection the moment the daemon goes down: `callbackd run` keeps
    serving while its bridge drains the run, so without this the view would never see the
    restart. While down, new connections are refused."""

    def __init__(self, upstream: int):
        self.upstream = upstream
        self.up = True
        self.lock = threading.Lock()
        self.open: list[socket.socket] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            with self.lock:
                up, port = self.up, self.upstream
            if not up:
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket):
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def down(self):
        """Drops every open connection and refuses new ones."""
        with self.lock:
            self.up = False
            conns, self.open = self.open, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def back(self, upstream: int):
        with self.lock:
            self.upstream, self.up = upstream, True

    def close(self):
        self.down()
        self.server.close()


@contextlib.contextmanager
def browsing(b: Browser, shots: Path, *stops):
    """The body of a browser test: no page error or request off 127.0.0.1 at its end; on a
    failure, a screenshot of what the page showed; the browser and `stops` closed either way."""
    try:
        yield
        errors = [line for line in b("log") if line.startswith(("pageerror", "blocked"))]
        assert not errors, errors
    except BaseException:
        try:
            b("screenshot", path=str(shots / "failure.png"))
        except Exception:
            pass
        raise
    finally:
        b.close()
        for stop in stops:
            stop()
        print(f"screenshots: {shots}")


def api(base: str, path: str, token: str = API_TOKEN) -> dict:
    u = urllib.parse.urlparse(base)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    try:
        c.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        r = c.getresponse()
        body = r.read()
        assert r.status == 200, f"GET {path}: {r.status} {body[:300]!r}"
        return json.loads(body)
    finally:
        c.close()


def all_events(base: str, run_id: str) -> list[dict]:
    events, after = [], 0
    while True:
        page = api(base, f"/v1/runs/{run_id}/events?after={after}&limit=500")
        events += page["events"]
        if page.get("next_after") is None:
            return events
        after = page["next_after"]


def row_keys(events: list[dict]) -> list[str]:
    """The console's rows for a run's durable events, in order: one per step/start/raw event,
    one per message id, one per tool call, one per task (run.js keys them the same way)."""
    keys: list[str] = []
    for ev in events:
        t = ev["type"]
        key = {"run_started": f"seq:{ev['seq']}", "step": f"seq:{ev['seq']}", "sdk_message": f"seq:{ev['seq']}",
               "message_snapshot": f"msg:{ev.get('message_id')}", "task": f"task:{ev.get('task_id')}",
               "tool_started": f"tool:{ev.get('tool_call_id')}", "tool_completed": f"tool:{ev.get('tool_call_id')}",
               "tool_outcome_unknown": f"tool:{ev.get('tool_call_id')}"}.get(t)
        if key and key not in keys:
            keys.append(key)
    return keys


def dom_rows(b: Browser) -> list[dict]:
    return b("eval", js="() => [...document.querySelectorAll('.transcript > li')].map(li => "
                         "({key: li.dataset.key, outcome: li.dataset.outcome || null, text: li.textContent}))")


def start_run(setup_env, tmp_path, backend, ws, db, st, tt) -> tuple[h.CallbackdRun, dict]:
    run = h.CallbackdRun(setup_env, tmp_path, ws, backend, db, st, tt)
    ready = json.loads(run.proc.wait_for_line("callbackd ready ", timeout=30))
    # The log gets the console URL without the token; the 0600 runtime file has it whole.
    assert ready["console_url"] == f"{ready['url']}ui/", ready
    runtime = json.loads(Path(ready["runtime_file"]).read_text())
    assert runtime["console_url"] == f"{ready['url']}ui/#token={API_TOKEN}", runtime
    return run, ready


def daemon_with(setup_env, tmp_path, monkeypatch, config_text: str):
    """`callbackd run` with the real bridge and the fake backend, configured by `config_text`
    and the API token; its data in <tmp_path>/data."""
    config = tmp_path / "callbackd.toml"
    config.write_text(config_text)
    monkeypatch.setenv("CALLBACKD_CONFIG", str(config))
    monkeypatch.setenv("CALLBACKD_API_TOKEN", API_TOKEN)
    backend = h.FakeBackend(setup_env, tmp_path, "auto")
    db = tmp_path / "data" / "callbackd.db"
    db.parent.mkdir(parents=True)
    run, ready = start_run(setup_env, tmp_path, backend, tmp_path / "ws", db, h.rand_token(), h.rand_token())
    return backend, run, ready


def test_console_in_a_real_browser(setup_env, browser_env, tmp_path, monkeypatch):
    shots = tmp_path / "screenshots"
    shots.mkdir()
    config = tmp_path / "callbackd.toml"
    # The guarded tool leaves a line in this file each time it runs.
    marker = tmp_path / "guarded-runs"
    config.write_text(CONFIG.replace("__MARKER__", str(marker)))

    def guarded_runs() -> int:
        return len(marker.read_text().splitlines()) if marker.exists() else 0
    monkeypatch.setenv("CALLBACKD_CONFIG", str(config))
    monkeypatch.setenv("CALLBACKD_API_TOKEN", API_TOKEN)
    monkeypatch.setenv("CALLBACKD_API_READ_TOKEN", READ_TOKEN)
    backend = h.FakeBackend(setup_env, tmp_path, "auto")
    ws = tmp_path / "ws"
    db = tmp_path / "data" / "callbackd.db"
    db.parent.mkdir(parents=True)
    st, tt = h.rand_token(), h.rand_token()
    run, ready = start_run(setup_env, tmp_path, backend, ws, db, st, tt)
    proxy = Proxy(urllib.parse.urlparse(ready["url"]).port)
    base = f"http://127.0.0.1:{proxy.port}"
    console = f"{base}/ui/"
    b = Browser(browser_env, tmp_path)
    with browsing(b, shots, proxy.close):
        # A wrong token says so and asks again; the right one from the fragment is taken out of
        # the address bar.
        b("goto", url=console + "#token=not-the-token")
        b("wait", selector="#token-error")
        assert "not accepted" in b("eval", js="() => document.getElementById('token-error').textContent")
        b("goto", url=console + "#token=" + API_TOKEN)
        b("wait", selector="h1")
        assert API_TOKEN not in b("url"), "the token must not stay in the address bar"

        # New session, by keyboard alone (Tab to the button, Enter), then a turn that calls
        # the echo tool.
        b("wait", selector="#new-session")
        for _ in range(12):
            if b("eval", js="() => document.activeElement?.id") == "new-session":
                break
            b("key", key="Tab")
        assert b("eval", js="() => document.activeElement?.id") == "new-session", "Tab never reaches New session"
        b("key", key="Enter")
        b("wait", selector="#message")
        b("fill", selector="#message", text="Please call the echo tool.")
        b("click", selector="#send")
        b("wait", selector=".transcript .tool[data-outcome='ok']")
        b("wait", selector=".final .output", timeout_ms=30000)
        final = b("eval", js="() => document.querySelector('.final .output').textContent")
        assert final.startswith("The tool returned:") and "ping" in final, final
        run1 = b("eval", js="() => document.querySelector('.run').dataset.runId")
        assert b("url").endswith(f"#/runs/{run1}")
        assert row_keys(all_events(base, run1)) == [r["key"] for r in dom_rows(b)]
        b("screenshot", path=str(shots / "1-tool-turn.png"))

        # A slow tool, and the daemon restarted while it runs.
        backend.post_script({"steps": [{"text": "Working on it."}, {"tool": "slow", "args": {}},
                                       {"textFromLastTool": "Slow said: "}],
                             "usage": {"inputTokens": 30, "outputTokens": 9}})
        b("fill", selector="#message", text="Now the slow one.")
        b("press", selector="#message", key="Control+Enter")
        b("wait", selector=".transcript .tool[data-outcome='running']")
        run2 = b("eval", js="() => document.querySelector('.run').dataset.runId")
        assert run2 and run2 != run1
        b("wait", selector="#cancel")                       # a live run can be cancelled
        before = dom_rows(b)
        # Every connection state the view goes through from here on.
        b("eval", js="""() => { window.__conn = []; const run = document.querySelector('.run');
            const note = () => { const s = run.dataset.conn; if (window.__conn.at(-1) !== s) window.__conn.push(s); };
            new MutationObserver(note).observe(run, {attributes: true, attributeFilter: ['data-conn']}); note(); }""")
        # The daemon goes down (SIGTERM: callbackd forwards it, the bridge finishes the run
        # while callbackd still stores its events, then both exit) and the browser loses its
        # stream at that moment, in the middle of the tool call.
        os.kill(run.proc.pid, signal.SIGTERM)
        proxy.down()
        b("wait", selector=".conn.waiting", timeout_ms=20000)
        waiting = b("eval", js="() => document.querySelector('.conn').textContent")
        assert "Reconnecting" in waiting and "resuming after event #" in waiting, waiting
        b("screenshot", path=str(shots / "2-reconnecting.png"))
        assert run.proc.popen.wait(timeout=30) == 0, run.proc.tail()
        shape = lambda rows: [(r["key"], r["outcome"]) for r in rows]
        assert shape(dom_rows(b)) == shape(before), "nothing may change while the daemon is away"
        run, ready = start_run(setup_env, tmp_path, backend, ws, db, st, tt)
        proxy.back(urllib.parse.urlparse(ready["url"]).port)
        # What the daemon stored while the browser was cut off comes from the new daemon's
        # replay after the view's last durable seq.
        b("wait", selector=".final .output", timeout_ms=60000)
        final2 = b("eval", js="() => document.querySelector('.final .output').textContent")
        assert final2 == f'Slow said: {{"slept":{SLOW_SECONDS}}}', final2
        rows = dom_rows(b)
        keys = [r["key"] for r in rows]
        assert len(keys) == len(set(keys)), f"duplicated rows: {keys}"
        assert keys[:len(before)] == [r["key"] for r in before], "rows shown before the restart changed order"
        assert keys == row_keys(all_events(base, run2)), "the view does not have exactly the run's rows"
        tools = [r for r in rows if r["key"].startswith("tool:")]
        assert len(tools) == 1 and tools[0]["outcome"] == "ok" and "slow" in tools[0]["text"], tools
        seen = b("eval", js="() => window.__conn")
        assert "waiting" in seen and seen[-1] == "ended", seen
        assert b("eval", js="() => document.getElementById('cancel').hidden"), "cancel must go once the run ended"
        b("screenshot", path=str(shots / "3-resumed-after-restart.png"))
        if os.environ.get("CONSOLE_DOCS_SCREENSHOT"):
            shutil.copy(shots / "3-resumed-after-restart.png", os.environ["CONSOLE_DOCS_SCREENSHOT"])

        # The session goes on after the restart (callbackd resumes it on the new bridge).
        b("fill", selector="#message", text="Hello again.")
        b("click", selector="#send")
        b("wait", selector=".final .output", timeout_ms=30000)
        assert b("eval", js="() => document.querySelector('.final .output').textContent") == "Hello from the fake model."

        # A tool whose calls wait for a person: the row offers Approve / Deny.
        backend.post_script({"steps": [{"text": "Asking first."}, {"tool": "guarded", "args": {"what": "deploy"}},
                                       {"textFromLastTool": "Guarded said: "}]})
        b("fill", selector="#message", text="Run the guarded tool.")
        b("click", selector="#send")
        b("wait", selector=".transcript .approval[data-decision='pending'] button.primary")
        assert "deploy" in b("eval", js="() => document.querySelector('.transcript .approval').textContent")
        b("screenshot", path=str(shots / "5-approval.png"))
        assert guarded_runs() == 0, "the guarded tool ran before it was approved"
        b("click", selector=".transcript .approval button.primary")
        b("wait", selector=".transcript .approval[data-decision='approved']")
        b("wait", selector=".final .output", timeout_ms=30000)
        assert b("eval", js="() => document.querySelector('.final .output').textContent") == 'Guarded said: {"done":true}'
        assert guarded_runs() == 1, "the approved call ran its tool once"
        assert b("eval", js="() => document.querySelectorAll('.transcript .approval button').length") == 0

        # Cancel during a slow tool call: the run ends cancelled; the call the bridge left
        # running (it is not in the stream) comes from callbackd's own record of it.
        backend.post_script({"steps": [{"text": "Slow again."}, {"tool": "slow", "args": {}},
                                       {"textFromLastTool": "never shown: "}]})
        b("fill", selector="#message", text="Slow again, then cancel it.")
        b("click", selector="#send")
        b("wait", selector=".transcript .tool[data-outcome='running']")
        b("click", selector="#cancel")
        b("wait", selector=".run[data-status='cancelled']", timeout_ms=30000)
        assert b("eval", js="() => document.querySelector('.final h3').textContent") == "Run cancelled"
        b("wait", selector="#cancel", state="hidden")
        run4 = b("eval", js="() => document.querySelector('.run').dataset.runId")
        calls = api(base, f"/v1/runs/{run4}")["tool_calls"]
        shown = b("eval", js="() => [...document.querySelectorAll('.transcript .tool')].map(li => li.dataset.outcome)")
        assert len(calls) == 1 and shown == ["cancelled"], (calls, shown)
        b("screenshot", path=str(shots / "6-cancelled.png"))

        # The read-only token reads everything and has no send, cancel or new-session controls.
        b("goto", url=f"{console}#token={READ_TOKEN}")
        b("wait", selector=".role-read")
        b("goto", url=f"{console}#/runs/{run2}")
        b("wait", selector=".final .output")
        assert [r["key"] for r in dom_rows(b)] == keys
        assert b("eval", js="() => [!!document.getElementById('message'), "
                            "!document.getElementById('cancel') || document.getElementById('cancel').hidden]") == [False, True]
        b("goto", url=f"{console}#/sessions")
        b("wait", selector="table.sessions tbody tr")
        assert b("eval", js="() => !document.getElementById('new-session')")

        # Narrow screens: nothing wider than the viewport.
        b("viewport", width=360, height=740)
        b("goto", url=f"{console}#/runs/{run2}")
        b("wait", selector=".final .output")
        assert b("eval", js="() => document.documentElement.scrollWidth <= 360"), "the run view overflows at 360 px"
        b("screenshot", path=str(shots / "4-narrow.png"))
        # Retention removed the events (410 replay_expired): the run's kept state is shown.
        subprocess.run([str(h.callbackd_bin()), "prune", "--db", str(db), "--older-than", "0s"], check=True,
                       capture_output=True, timeout=60)
        b("viewport", width=1000, height=780)
        b("goto", url=f"{console}#/runs/{run1}")
        b("wait", selector=".result .notice")
        assert "removed by retention" in b("eval", js="() => document.querySelector('.result .notice').textContent")
        assert b("eval", js="() => document.querySelector('.final .output').textContent") == final
        assert b("eval", js="() => document.querySelector('.run').dataset.status") == "finished"



DEPLOY_CONFIG = '''
[[tools.command]]
name = "deploy"
description = "Deploys to an environment"
input_schema = {{ type = "object", properties = {{ env = {{ type = "string" }} }} }}
argv = ["sh", "-c", "cat > '{marker}'; echo '{{\\"deployed\\": true}}'"]
approval = "always"
confirm = true
'''


def test_console_approves_with_edited_arguments(setup_env, browser_env, tmp_path, monkeypatch):
    """Issue 25: the approval card's editor; a refused edit is shown and leaves it pending; the
    edited arguments are what the tool runs with; the header counts what waits; a tool marked
    `confirm = true` runs only after the confirming click; an `ask_user` question is answered
    by clicking one of its options, and the answer reaches the model."""
    marker = tmp_path / "deployed.json"
    backend, run, ready = daemon_with(setup_env, tmp_path, monkeypatch, DEPLOY_CONFIG.format(marker=marker))
    base = ready["url"].rstrip("/")
    b = Browser(browser_env, tmp_path)
    try:
        b("goto", url=f"{base}/ui/#token={API_TOKEN}")
        b("wait", selector="#new-session")
        b("click", selector="#new-session")
        b("wait", selector="#message")
        backend.post_script({"steps": [{"text": "Deploying."}, {"tool": "deploy", "args": {"env": "prod"}},
                                       {"textFromLastTool": "Deploy said: "}]})
        b("fill", selector="#message", text="Deploy it.")
        b("click", selector="#send")
        card = ".transcript .approval[data-decision='pending']"
        b("wait", selector=f"{card} pre.args")
        assert '"env": "prod"' in b("eval", js=f"() => document.querySelector(\"{card} pre.args\").textContent")
        b("wait", selector="#approvals-count:not([hidden])", timeout_ms=15000)
        assert b("eval", js="() => document.getElementById('approvals-count').textContent") == "1"
        b("click", selector=f"{card} details.edit summary")
        b("fill", selector=f"{card} .args-editor", text='{"env": 5}')
        # confirm = true: Approve… shows what would run and sends nothing; Back leaves it.
        b("click", selector=f"{card} .decide button.primary")
        b("wait", selector=f"{card} .confirm-step:not([hidden])")
        asked = b("eval", js=f"() => document.querySelector(\"{card} .confirm-step\").textContent")
        assert 'deploy with {"env":5}' in asked, asked
        b("click", selector=f"{card} .confirm-back")
        b("wait", selector=f"{card} .confirm-step", state="hidden")
        assert approval_state(base) == "pending" and not marker.exists()
        b("click", selector=f"{card} .decide button.primary")
        b("click", selector=f"{card} .confirm-yes")
        b("wait", selector=f"{card} .decide-note:not(:empty)")
        note = b("eval", js=f"() => document.querySelector(\"{card} .decide-note\").textContent")
        assert "/env" in note and "type" in note, note
        assert not marker.exists()
        b("fill", selector=f"{card} .args-editor", text='{"env": "staging"}')
        b("click", selector=f"{card} .decide button.primary")
        b("click", selector=f"{card} .confirm-yes")
        b("wait", selector=".transcript .approval[data-decision='approved']")
        assert "edited" in b("eval", js="() => document.querySelector('.transcript .approval').textContent")
        b("wait", selector=".final .output", timeout_ms=30000)
        assert b("eval", js="() => document.querySelector('.final .output').textContent") == 'Deploy said: {"deployed":true}'
        assert json.loads(marker.read_text()) == {"env": "staging"}

        # A question: its options are buttons; a click answers, and the model gets the answer.
        backend.post_script({"steps": [{"tool": "ask_user", "args": {"question": "Which region?", "options": ["eu", "us"]}},
                                       {"textFromLastTool": "The person said: "}]})
        b("fill", selector="#message", text="Ask me where.")
        b("click", selector="#send")
        q = ".transcript .question[data-decision='pending']"
        b("wait", selector=f"{q} button.option")
        assert b("eval", js=f"() => document.querySelector(\"{q} .question-text\").textContent") == "Which region?"
        assert b("eval", js=f"() => [...document.querySelectorAll(\"{q} button.option\")].map(x => x.textContent)") == ["eu", "us"]
        b("click", selector=f"{q} button.option:last-child")
        b("wait", selector=".transcript .question[data-decision='approved']")
        b("wait", selector=".final .output", timeout_ms=30000)
        b("wait", selector=".final .output:not(:empty)")
        final = b("eval", js="() => document.querySelector('.final .output').textContent")
        assert final == 'The person said: {"answer":"us"}', final

        # A question without options, answered in the person's own words on the Approvals page.
        backend.post_script({"steps": [{"tool": "ask_user", "args": {"question": "Any last words?"}},
                                       {"textFromLastTool": "Last words: "}]})
        b("fill", selector="#message", text="Ask me anything.")
        b("click", selector="#send")
        b("wait", selector=".transcript .question[data-decision='pending']")
        b("goto", url=f"{base}/ui/#/approvals")
        item = ".approvals-list .approval"
        b("wait", selector=f"{item} .answer-text")
        assert b("eval", js=f"() => document.querySelector(\"{item} .question-text\").textContent") == "Any last words?"
        run_link = b("eval", js=f"() => document.querySelector(\"{item} a[href^='#/runs/']\").getAttribute('href')")
        b("fill", selector=f"{item} .answer-text", text="ship it")
        b("press", selector=f"{item} .answer-text", key="Enter")
        b("wait", selector=".approvals-list .approval", state="detached")
        b("goto", url=f"{base}/ui/{run_link}")
        b("wait", selector=".final .output:not(:empty)", timeout_ms=30000)
        final = b("eval", js="() => document.querySelector('.final .output').textContent")
        assert final == 'Last words: {"answer":"ship it"}', final
    finally:
        b.close()
        run.proc.stop()


def approval_state(base: str) -> str:
    """The state of the one approval the daemon at `base` has."""
    conn = http.client.HTTPConnection(urllib.parse.urlparse(base).hostname, urllib.parse.urlparse(base).port, timeout=10)
    conn.request("GET", "/v1/approvals?state=all", headers={"Authorization": f"Bearer {API_TOKEN}"})
    body = json.loads(conn.getresponse().read())
    conn.close()
    return body["approvals"][0]["state"]


def test_console_finds_names_deletes_sessions_and_shows_usage(setup_env, browser_env, tmp_path, monkeypatch):
    """Issue 21: the sessions search, a session renamed and deleted (after a confirmation),
    the runs found across sessions, the usage page's chart; each page at 360 px too. With
    CONSOLE_DOCS_DIR=docs the screenshots refresh docs/console-*.png."""
    monkeypatch.setenv("CALLBACKD_API_TOKEN", API_TOKEN)
    backend = h.FakeBackend(setup_env, tmp_path, "auto")
    ws = tmp_path / "ws"
    db = tmp_path / "data" / "callbackd.db"
    db.parent.mkdir(parents=True)
    run, ready = start_run(setup_env, tmp_path, backend, ws, db, h.rand_token(), h.rand_token())
    base = ready["url"].rstrip("/")
    shots = tmp_path / "screenshots"
    shots.mkdir()
    docs = os.environ.get("CONSOLE_DOCS_DIR")

    def call(method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
        u = urllib.parse.urlparse(base)
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        try:
            c.request(method, path, json.dumps(body) if body is not None else None,
                      {"Authorization": f"Bearer {API_TOKEN}", "Content-Type": "application/json"})
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    # Two sessions with a turn each (the second one calls the echo tool).
    sids = []
    for text in ("hello", "please call the echo tool"):
        status, body = call("POST", "/v1/sessions", {})
        assert status == 201, body
        sids.append(json.loads(body)["session"]["session_id"])
        status, _ = call("POST", f"/v1/sessions/{sids[-1]}/messages", {"text": text})
        assert status == 200
    b = Browser(browser_env, tmp_path)

    def shot(name: str):
        b("screenshot", path=str(shots / name), full_page=False)
        if docs:
            shutil.copy(shots / name, Path(docs) / f"console-{name}")
    with browsing(b, shots, run.proc.stop):
        # Rename the first session on its page.
        b("goto", url=f"{base}/ui/#token={API_TOKEN}")
        b("wait", selector="table.sessions tbody tr")
        b("goto", url=f"{base}/ui/#/sessions/{sids[0]}")
        b("wait", selector="#session-name")
        b("fill", selector="#session-name", text="Quarterly report")
        b("click", selector="#rename")
        b("wait", selector="dl.facts dd:nth-of-type(2)")
        b("wait", selector=f"#session-name[value='Quarterly report']")
        assert api(base, f"/v1/sessions/{sids[0]}")["name"] == "Quarterly report"
        # A refused name says why and changes nothing.
        b("fill", selector="#session-name", text="x" * 200 + "y")
        b("eval", js="() => { const i = document.getElementById('session-name'); i.removeAttribute('maxlength'); "
                     "i.value = 'x'.repeat(201); }")
        b("click", selector="#rename")
        b("wait", selector=".session-actions .failure:not([hidden])")
        assert "at most 200" in b("eval", js="() => document.querySelector('.session-actions .failure').textContent")
        assert api(base, f"/v1/sessions/{sids[0]}")["name"] == "Quarterly report"

        # Find it by name on the sessions list.
        b("goto", url=f"{base}/ui/#/sessions")
        b("wait", selector="#session-q")
        b("wait", selector="table.sessions tbody tr")
        b("fill", selector="#session-q", text="quarterly")
        b("click", selector="#session-search")
        b("wait", selector=f"table.sessions tbody tr[data-session-id='{sids[0]}']")
        rows = b("eval", js="() => [...document.querySelectorAll('table.sessions tbody tr')].map(r => r.dataset.sessionId)")
        assert rows == [sids[0]], rows
        shot("sessions.png")
        b("fill", selector="#session-q", text="nothing like it")
        b("click", selector="#session-search")
        b("wait", selector="table.sessions tbody tr", state="detached")
        # The rows go at once; the status says "Loading…" until the answer, then why it is empty.
        b("wait", selector="main [role=status]:has-text('No sessions match')")

        # Runs of every session; a search by what was asked.
        b("goto", url=f"{base}/ui/#/runs")
        b("wait", selector="table.runs-all tbody tr")
        assert b("eval", js="() => document.querySelectorAll('table.runs-all tbody tr').length") == 2
        b("fill", selector="#runs-q", text="echo tool")
        b("click", selector="#runs-search")
        b("wait", selector="table.runs-all tbody tr:only-child")
        asked = b("eval", js="() => document.querySelector('table.runs-all tbody tr .c-in').textContent")
        assert asked == "please call the echo tool", asked
        # Full dates on hover.
        assert b("eval", js="() => document.querySelector('table.runs-all time').title").count(":") >= 2
        shot("runs.png")

        # Usage: one day, the chart's bars, the totals match the API.
        b("goto", url=f"{base}/ui/#/usage")
        b("wait", selector="svg.chart g.day")
        usage = api(base, "/v1/usage?group_by=day")
        assert b("eval", js="() => document.querySelectorAll('svg.chart g.day').length") == len(usage["groups"]) == 1
        tip = b("eval", js="() => document.querySelector('svg.chart g.day title').textContent")
        assert f"{usage['groups'][0]['tokens']['input']:,} input" in tip, tip
        assert b("eval", js="() => document.querySelector('table.usage tbody tr td:nth-child(2)').textContent") == "2"
        shot("usage.png")

        # Narrow: nothing wider than 360 px on any of the new pages.
        b("viewport", width=360, height=740)
        for page, ready_sel in (("#/sessions", "table.sessions tbody tr"), ("#/runs", "table.runs-all tbody tr"),
                                ("#/usage", "svg.chart"), (f"#/sessions/{sids[0]}", "#delete-session")):
            b("goto", url=f"{base}/ui/{page}")
            b("wait", selector=ready_sel)
            assert b("eval", js="() => document.documentElement.scrollWidth <= 360"), f"{page} overflows at 360 px"
            if page == "#/runs":
                shot("narrow.png")
        b("viewport", width=1000, height=780)

        # update_plan: the run shows the plan as a checklist.
        backend.post_script({"steps": [{"text": "Planning."}, {"tool": "update_plan", "args": {"items": [
            {"title": "Read the invoice", "status": "completed"}, {"title": "Refund order 42", "status": "in_progress"},
            {"title": "Tell the customer", "status": "pending"}]}}, {"text": "Planned."}]})
        status, body = call("POST", f"/v1/sessions/{sids[1]}/messages", {"text": "make a plan"})
        assert status == 200
        plan_run = json.loads(next(l for l in body.decode().splitlines() if '"run_started"' in l)[len("data: "):])["run_id"]
        b("goto", url=f"{base}/ui/#/runs/{plan_run}")
        b("wait", selector=".transcript .plan ul.checklist li[data-status='in_progress']")
        assert b("eval", js="() => [...document.querySelectorAll('.transcript .plan li')].map(li => li.dataset.status)") == [
            "completed", "in_progress", "pending"]
        # The prompt at the top; the call's arguments and result, pretty-printed; full dates on hover.
        assert b("eval", js="() => document.querySelector('.transcript .start .prompt .text').textContent") == "make a plan"
        b("wait", selector=".transcript .tool[data-outcome='ok'] details.result pre", state="attached")
        shown = b("eval", js="""() => { const t = document.querySelector('.transcript .tool[data-outcome="ok"]');
            return {args: t.querySelector('details.arguments pre').textContent, result: t.querySelector('details.result pre').textContent,
                    open: t.querySelector('details.arguments').open} }""")
        assert json.loads(shown["args"])["items"][1] == {"title": "Refund order 42", "status": "in_progress"}, shown
        assert '\n  "items"' in shown["args"], "pretty-printed"
        assert not shown["open"], "the plan's 16 lines of arguments start folded"
        # The tool's own result (issue 35), not the bridge's MCP wrapper around its text.
        assert json.loads(shown["result"]) == {"items": 3, "updated": True}, shown
        assert b("eval", js="() => /20\\d\\d/.test(document.querySelector('.transcript .start time').title)")
        # The raw JSON of the events behind a row, on demand (closed until asked for).
        raw = b("eval", js="""() => { const d = document.querySelector('.transcript .tool[data-outcome="ok"] details.raw');
            return {open: d.open, text: d.querySelector('pre').textContent} }""")
        # (update_plan's call starts with its `plan` event, which stands for tool_started)
        assert not raw["open"] and '"type": "plan"' in raw["text"] and '"type": "tool_completed"' in raw["text"], raw
        shot("plan.png")
        b("goto", url=f"{base}/ui/#/sessions/{sids[0]}")
        b("wait", selector="#delete-session")

        # Delete, after a confirmation that can be declined.
        b("wait", selector="#delete-confirm", state="hidden")
        b("click", selector="#delete-session")
        b("wait", selector="#delete-keep")
        b("click", selector="#delete-keep")
        b("wait", selector="#delete-confirm", state="hidden")
        b("wait", selector="#delete-session")
        assert api(base, f"/v1/sessions/{sids[0]}")["session_id"] == sids[0]
        b("click", selector="#delete-session")
        b("click", selector="#delete-confirm")
        b("wait", selector="#session-q")
        b("wait", selector="table.sessions tbody tr")
        rows = b("eval", js="() => [...document.querySelectorAll('table.sessions tbody tr')].map(r => r.dataset.sessionId)")
        assert rows == [sids[1]], rows
        assert call("GET", f"/v1/sessions/{sids[0]}")[0] == 404



def test_console_timeline_names_layouts_and_unknown_ids(setup_env, browser_env, tmp_path, monkeypatch):
    """Issue 38: a session named when it is made (form, list, API); the run page as a timeline
    (start, end and duration in its header, a dated time on every row, a held call shown as
    waiting for a person, not running); the Runs page at 1280 and 390 px with no horizontal
    overflow and what was asked visible; unknown session and run pages that stop loading and
    offer no Send; the token remembered across tabs only when asked. With CONSOLE_DOCS_DIR=docs
    the screenshots refresh docs/console-*.png."""
    marker = tmp_path / "guarded-runs"
    backend, run, ready = daemon_with(setup_env, tmp_path, monkeypatch, CONFIG.replace("__MARKER__", str(marker)))
    base = ready["url"].rstrip("/")
    console = f"{base}/ui/"
    shots = tmp_path / "screenshots"
    shots.mkdir()
    docs = os.environ.get("CONSOLE_DOCS_DIR")
    b = Browser(browser_env, tmp_path)

    def shot(name: str, full_page: bool = False):
        b("screenshot", path=str(shots / name), full_page=full_page)
        if docs:
            shutil.copy(shots / name, Path(docs) / f"console-{name}")

    def fits(width: int) -> bool:
        return b("eval", js=f"() => document.documentElement.scrollWidth <= {width}")

    with browsing(b, shots, run.proc.stop):
        # The token typed into the dialog with "Remember on this device": a new tab (a fresh
        # sessionStorage) needs no token; without the box, a new tab asks again.
        b("goto", url=console)
        b("wait", selector="#token-input")
        b("fill", selector="#token-input", text=API_TOKEN)
        b("click", selector="#token-remember")
        b("click", selector="#token-form button[type=submit]")
        b("wait", selector="#new-session")
        b("eval", js="() => sessionStorage.clear()")
        b("goto", url=console + "#/runs")
        b("wait", selector="table.runs-all")
        assert not b("eval", js="() => document.getElementById('token-dialog').open"), "a remembered token is asked again"
        b("click", selector="#forget")                          # Change token forgets it everywhere
        b("wait", selector="#token-input")
        assert b("eval", js="() => localStorage.length") == 0
        b("fill", selector="#token-input", text=API_TOKEN)     # this tab only, this time
        b("click", selector="#token-form button[type=submit]")
        b("wait", selector="#role:not([hidden])")
        b("eval", js="() => sessionStorage.clear()")
        b("goto", url=console + "#/sessions")
        b("wait", selector="#token-input")
        assert b("eval", js="() => localStorage.length") == 0, "kept for other tabs without being asked to"
        b("fill", selector="#token-input", text=API_TOKEN)
        b("click", selector="#token-form button[type=submit]")

        # A session named in the New session form: its page, the list and the API say so.
        b("wait", selector="#new-name")
        b("fill", selector="#new-name", text="Release notes for 2.4")
        shot("new-session.png")
        b("click", selector="#new-session")
        b("wait", selector="#message")
        sid = b("url").rsplit("/", 1)[1]
        b("wait", selector="h1:has-text('Release notes for 2.4')")
        assert api(base, f"/v1/sessions/{sid}")["name"] == "Release notes for 2.4"

        # A turn with a held call: the tool row waits for a person, and says since when.
        backend.post_script({"steps": [{"text": "Asking first."}, {"tool": "guarded", "args": {"what": "notes"}},
                                       {"textFromLastTool": "Guarded said: "}]})
        b("fill", selector="#message", text="Run the guarded tool.")
        b("click", selector="#send")
        b("wait", selector=".transcript .approval[data-decision='pending'] button.primary")
        b("wait", selector=".transcript .tool[data-outcome='waiting']")
        waiting = b("eval", js="() => document.querySelector('.transcript .tool[data-outcome=\"waiting\"]').textContent")
        assert "waits for a person's approval" in waiting and " since " in waiting, waiting
        assert "running" not in waiting, waiting
        assert "going for" in b("eval", js="() => document.querySelector('.meta.times').textContent")
        shot("waiting.png")
        b("click", selector=".transcript .approval button.primary")
        b("wait", selector=".final .output", timeout_ms=30000)
        run_id = b("eval", js="() => document.querySelector('.run').dataset.runId")

        # The timeline: start, end and duration in the header; a time with its date on every
        # row (the full date on hover); the decision's time.
        times = b("eval", js="() => document.querySelector('.meta.times').textContent")
        assert times.startswith("started ") and " · ended " in times and " · took " in times, times
        rows = b("eval", js="""() => [...document.querySelectorAll('.transcript > li')].map(li => ({
            key: li.dataset.key, time: li.querySelector('time')?.textContent || null,
            title: li.querySelector('time')?.title || null}))""")
        assert len(rows) >= 6, rows
        for r in rows:
            assert r["time"] and r["title"], f"a row without a time: {r}"
            # "Dec 6 10:00:01": a month and day before the clock, and the year on hover.
            assert len(r["time"].split()) >= 3 and r["time"].count(":") == 2, r
            assert any(str(y) in r["title"] for y in range(2024, 2100)), r
        assert b("eval", js="() => !!document.querySelector('.transcript .approval .outcome time')"), "when it was decided"
        assert b("eval", js="() => !!document.querySelector('.final .ended time')")
        shot("timeline.png", full_page=True)

        # A long answer, so the lists have something to cut.
        long = "The release notes, section by section: " + "a change worth a line, " * 40 + "the end."
        backend.post_script({"steps": [{"text": long}]})
        b("fill", selector="#message", text="Write the release notes for 2.4 in detail, please, section by section.")
        b("click", selector="#send")
        b("wait", selector=".final .output", timeout_ms=30000)

        # The Runs page at 1280 and 390 px: nothing past the right edge, Asked and Output shown
        # (cut to a line, the whole on a click), ids short.
        for width, height, name in ((1280, 800, "runs-1280.png"), (390, 844, "runs-390.png")):
            b("viewport", width=width, height=height)
            b("goto", url=f"{console}#/runs")
            b("wait", selector="table.runs-all tbody tr")
            assert fits(width), f"the runs page overflows at {width} px"
            seen = b("eval", js="""() => [...document.querySelectorAll('table.runs-all tbody tr')].map(tr => {
                const box = (sel) => { const r = tr.querySelector(sel).getBoundingClientRect();
                                       return {w: r.width, h: r.height, right: r.right}; };
                return {asked: box('.c-in'), out: box('.c-out'), text: tr.querySelector('.c-in').textContent}; })""")
            assert len(seen) == 2, seen
            for r in seen:
                assert r["asked"]["w"] > 100 and r["asked"]["right"] <= width, (width, r)
                assert r["out"]["w"] > 100 and r["out"]["right"] <= width, (width, r)
            tall = b("eval", js="() => Math.max(...[...document.querySelectorAll('table.runs-all tbody tr')].map(tr => tr.getBoundingClientRect().height))")
            assert tall < (200 if width < 600 else 90), f"a row {tall} px tall at {width} px"
            shot(name)
            # A click shows the whole output; another cuts it again.
            cell = "table.runs-all tbody tr:first-child .c-out .preview"
            b("click", selector=cell)
            assert b("eval", js=f"() => document.querySelector('{cell}').getBoundingClientRect().height") > 40
            assert fits(width)
            b("click", selector=cell)
        # Dates are typed as ISO days; anything else is refused, saying how.
        b("fill", selector="#runs-since", text="12/01/2026")
        b("click", selector="#runs-search")
        b("wait", selector="main .failure:not([hidden])")
        assert "YYYY-MM-DD" in b("eval", js="() => document.querySelector('main .failure').textContent")
        b("fill", selector="#runs-since", text="2020-01-01")
        b("click", selector="#runs-search")
        b("wait", selector="main .failure", state="hidden")
        b("wait", selector="table.runs-all tbody tr")
        b("viewport", width=1280, height=800)

        # The sessions list: the name, and the session's page at 390 px.
        b("goto", url=f"{console}#/sessions")
        b("wait", selector=f"tr[data-session-id='{sid}']")
        assert "Release notes for 2.4" in b("eval", js=f"() => document.querySelector(\"tr[data-session-id='{sid}']\").textContent")
        b("viewport", width=390, height=844)
        b("goto", url=f"{console}#/sessions/{sid}")
        b("wait", selector="table.runs tbody tr")
        assert fits(390), "the session page overflows at 390 px"
        b("viewport", width=1280, height=800)

        # Unknown ids: the error, no endless "Loading…", no message box.
        for page, title in ((f"#/sessions/no-such-session", "No such session"), (f"#/runs/no-such-run", "No such run")):
            b("goto", url=f"{console}{page}")
            b("wait", selector=f"h1:has-text('{title}')")
            b("wait", selector="main .failure")
            state = b("eval", js="() => ({send: !!document.getElementById('message'), "
                                 "loading: document.querySelector('main').textContent.includes('Loading')})")
            assert state == {"send": False, "loading": False}, (page, state)
        shot("unknown.png")

