"""Issue 40, end to end with the real bridge and the fake backend: webhooks for a held deploy,
its decision and the run's end, verified by the `standardwebhooks` package (the Standard
Webhooks project's own Python verifier, not our code) in a receiver on 127.0.0.1. A receiver
that fails twice gets the third attempt with the same `webhook-id`; one that is down while
callbackd restarts gets the delivery after; two daemons on one PostgreSQL store deliver each
event once.
"""
from __future__ import annotations

import base64
import json
import socket
import threading
import time
import tomllib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

import harness as h
from test_approvals_bound_e2e import DEPLOY, BACKENDS, Stack, pending, run_events, send, store_config
from test_run_api_e2e import Api

SECRET = "whsec_" + base64.b64encode(b"callbackd-e2e-webhook-secret-32b").decode()

WEBHOOK = """
[[webhooks]]
url = "{url}"
secret_env = "E2E_WEBHOOK_SECRET"
retry_backoff_ms = {backoff}
timeout_ms = 3000
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Receiver:
    """A webhook endpoint that verifies every request with `standardwebhooks` and answers the
    statuses of `script` in turn, then 200."""

    def __init__(self, port: int | None = None, script: list[int] | None = None):
        self.got: list[dict] = []
        self.script = list(script or [])
        self.lock = threading.Lock()
        wh = Webhook(SECRET)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    wh.verify(body, headers)
                    verified = True
                except WebhookVerificationError:
                    verified = False
                with outer.lock:
                    status = outer.script.pop(0) if outer.script else 200
                    outer.got.append({"id": headers.get("webhook-id"), "verified": verified,
                                      "body": json.loads(body), "status": status})
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port or 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def of(self, kind: str, n: int = 1, limit: float = 30) -> list[dict]:
        deadline = time.monotonic() + limit
        while True:
            with self.lock:
                got = [g for g in self.got if g["body"]["type"] == kind]
            if len(got) >= n:
                return got
            if time.monotonic() > deadline:
                with self.lock:
                    seen = [(g["body"]["type"], g["status"]) for g in self.got]
                raise AssertionError(f"{n} {kind} did not arrive in {limit} s; got {seen}")
            time.sleep(0.05)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(autouse=True)
def webhook_secret(monkeypatch):
    monkeypatch.setenv("E2E_WEBHOOK_SECRET", SECRET)


def stack(env, tmp, url: str, store: str = "sqlite", backoff: str = "[200, 200, 200]") -> tuple[Stack, object]:
    marker = tmp / "deployed.json"
    config = (store_config(store, tmp) + DEPLOY.format(marker=marker, timeout=600000)
              + WEBHOOK.format(url=url, backoff=backoff))
    s = Stack(env, tmp, store, scenario="tool", config=config,
              backend_env={"FB_TOOL_NAME": "deploy", "FB_TOOL_ARGS": json.dumps({"env": "prod"})})
    return s, marker


@BACKENDS
def test_a_held_deploy_its_approval_and_the_runs_end_are_delivered_and_verify(setup_env, tmp_path, store):
    rx = Receiver()
    s, marker = stack(setup_env, tmp_path, rx.url, store=store)
    sid = s.session()
    send(s, sid, "deploy with the tool")
    card = pending(s.api)
    held_at = time.monotonic()
    required = rx.of("approval.required", limit=10)[0]
    assert time.monotonic() - held_at < 10
    assert required["verified"], required
    data = required["body"]["data"]
    assert data["approval"]["id"] == card["id"] and data["approval"]["tool"] == "deploy", data
    assert data["approval"]["arguments"] == {"env": "prod"}, data
    assert data["run"] == card["run_id"] and data["session"] == sid and data["namespace"] == "default", data
    assert data["console_url"].endswith(f"/ui/#/runs/{card['run_id']}") and "token" not in data["console_url"]
    status, body = s.api.call("POST", f"/v1/approvals/{card['id']}", {"decision": "approve", "reason": "ship it"})
    assert status == 200, body
    run_events(s.api, card["run_id"])
    assert json.loads(marker.read_text()) == {"env": "prod"}
    resolved = rx.of("approval.resolved")[0]
    assert resolved["verified"] and resolved["body"]["data"]["approval"]["state"] == "approved", resolved
    ended = rx.of("run.ended")[0]
    assert ended["verified"], ended
    e = ended["body"]["data"]
    assert e["run"] == card["run_id"] and e["status"] == "finished" and e["error"] is None, e
    assert isinstance(e["duration_ms"], int) and e["duration_ms"] >= 0, e
    time.sleep(1)
    with rx.lock:
        ids = [g["id"] for g in rx.got]
    assert len(ids) == len(set(ids)) == 3, rx.got
    status, listed = s.api.call("GET", "/v1/webhooks/deliveries")
    assert status == 200 and {d["state"] for d in listed["deliveries"]} == {"delivered"}, listed
    s.stop()
    rx.stop()


def test_a_receiver_that_fails_twice_gets_the_third_attempt_with_the_same_id(setup_env, tmp_path):
    rx = Receiver(script=[500, 500])
    s, _ = stack(setup_env, tmp_path, rx.url)
    sid = s.session()
    send(s, sid, "deploy with the tool")
    pending(s.api)
    got = rx.of("approval.required", 3)
    assert [g["status"] for g in got] == [500, 500, 200], got
    assert len({g["id"] for g in got}) == 1 and all(g["verified"] for g in got), got
    status, listed = s.api.call("GET", "/v1/webhooks/deliveries?state=delivered")
    d = [d for d in listed["deliveries"] if d["type"] == "approval.required"][0]
    assert d["attempts"] == 3 and d["id"] == got[0]["id"], d
    s.stop()
    rx.stop()


def test_a_delivery_whose_receiver_was_down_across_a_restart_arrives_after_it(setup_env, tmp_path):
    port = free_port()     # nobody listens there yet
    # The second retry is due well after the restart: the attempts before it fail while callbackd
    # stops and starts again.
    s, _ = stack(setup_env, tmp_path, f"http://127.0.0.1:{port}/hook", backoff="[500, 20000]")
    sid = s.session()
    send(s, sid, "deploy with the tool")
    card = pending(s.api)
    deadline = time.monotonic() + 30
    while True:
        status, listed = s.api.call("GET", "/v1/webhooks/deliveries")
        tried = [d for d in listed["deliveries"] if d["attempts"] >= 1]
        if tried:
            assert tried[0]["state"] == "pending" and tried[0]["last_error"], tried
            break
        assert time.monotonic() < deadline, listed
        time.sleep(0.1)
    s.stop()
    rx = Receiver(port=port)
    s.start()
    got = rx.of("approval.required", limit=60)[0]
    assert got["verified"] and got["body"]["data"]["approval"]["id"] == card["id"], got
    # The held call ended with the daemon that held it: its end is told too.
    resolved = rx.of("approval.resolved", limit=30)[0]
    assert resolved["body"]["data"]["approval"]["state"] == "cancelled", resolved
    s.stop()
    rx.stop()


def test_two_daemons_on_one_postgres_deliver_each_event_once(setup_env, tmp_path):
    rx = Receiver()
    s, marker = stack(setup_env, tmp_path, rx.url, store="postgres")
    # Daemon B: `callbackd serve` on the same database, with the same webhooks.
    b = h.Proc("callbackd-b", [h.callbackd_bin(), "serve", "--listen", "127.0.0.1:0", "--db", s.location,
                               "--config", s.config], tmp_path / "logs-b", cwd=tmp_path,
               env={"CALLBACKD_STORE_TOKEN": h.rand_token(), "CALLBACKD_TOOL_TOKEN": h.rand_token(),
                    "E2E_WEBHOOK_SECRET": SECRET})
    ready = json.loads(b.wait_for_line("callbackd ready ", timeout=30))
    api_b = Api(ready["url"], tomllib.loads((s.db.parent / "callbackd.tokens").read_text())["api_token"])
    sid = s.session()
    send(s, sid, "deploy with the tool")
    card = pending(s.api)
    rx.of("approval.required")
    # Decided through B: B records approval.resolved; the bridge's writes through A, run.ended.
    status, body = api_b.call("POST", f"/v1/approvals/{card['id']}", {"decision": "approve"})
    assert status == 200, body
    run_events(s.api, card["run_id"])
    rx.of("approval.resolved")
    rx.of("run.ended")
    time.sleep(3)    # several claim rounds of both daemons
    with rx.lock:
        ids = [g["id"] for g in rx.got]
    assert len(ids) == 3 and len(set(ids)) == 3, rx.got
    status, listed = api_b.call("GET", "/v1/webhooks/deliveries")
    assert [d["attempts"] for d in listed["deliveries"]] == [1, 1, 1], listed
    b.stop()
    s.stop()
    rx.stop()
