"""Issue 23, end to end: callbackd's OpenTelemetry traces of runs arrive in Arize Phoenix (the
real collector, PyPI arize-phoenix installed by setup.sh into a venv of its own, on 127.0.0.1)
and read back through Phoenix's own REST API; a collector that stops mid-run costs nothing but
the spans, which /metrics counts.

One Phoenix serves the module (it takes 10-40 s to start); the test that stops it runs last.
The turn: the real bridge against the fake backend, whose model calls `deploy` (held for
approval, approved through the run API) and then the built-in `echo`.
"""
from __future__ import annotations

import json
import os
import socket
import time
import urllib.request
from pathlib import Path

import pytest

import harness as h
from test_approvals_bound_e2e import pending, run_events, send
from test_run_api_e2e import ApiStack

PROJECT = "callbackd-e2e"

CONFIG = """
[[tools.command]]
name = "deploy"
description = "Deploys to an environment"
argv = ["sh", "-c", "cat > '{marker}'; echo '{{\\"deployed\\": true}}'"]
input_schema = {{ type = "object", properties = {{ env = {{ type = "string" }} }} }}
approval = "always"

[telemetry]
otlp_endpoint = "{endpoint}"
service_name = "callbackd-e2e"
capture_content = true
"""

SCRIPT = {"steps": [{"text": "Deploying first."}, {"tool": "deploy", "args": {"env": "prod"}},
                    {"tool": "echo", "args": {"text": "ping"}}, {"textFromLastTool": "Echo said: "}],
          "usage": {"inputTokens": 20, "outputTokens": 12}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def flat(attrs: dict, prefix: str = "") -> dict:
    """Phoenix answers dotted attribute names as nested objects: {"gen_ai": {"agent": {"id": ...}}}."""
    out = {}
    for k, v in attrs.items():
        if isinstance(v, dict):
            out.update(flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def get_json(url: str, timeout: float = 10) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


class Phoenix:
    def __init__(self, workdir: Path):
        binary = os.environ.get("PHOENIX_BIN", "")
        if not binary or not Path(binary).exists():
            if h.ci():
                raise AssertionError("PHOENIX_BIN is not set up (tests/e2e/phoenix_setup.sh)")
            pytest.skip("Arize Phoenix is not installed (CALLBACKD_E2E_NO_PHOENIX was set for setup.sh)")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {"PHOENIX_PORT": str(self.port), "PHOENIX_GRPC_PORT": str(free_port()),
               "PHOENIX_HOST": "127.0.0.1", "PHOENIX_WORKING_DIR": str(workdir / "phoenix"),
               "PHOENIX_TELEMETRY_ENABLED": "false"}
        self.proc = h.Proc("phoenix", [binary, "serve"], workdir / "logs", env=env, cwd=workdir)
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if not self.proc.alive() or time.monotonic() > deadline:
                raise RuntimeError(f"phoenix did not start\n{self.proc.tail()}")
            time.sleep(0.25)

    def spans(self, trace_id: str | None = None) -> list[dict]:
        out, cursor = [], None
        while True:
            q = "?limit=1000" + (f"&cursor={cursor}" if cursor else "")
            try:
                page = get_json(f"{self.url}/v1/projects/{PROJECT}/spans{q}")
            except urllib.error.HTTPError as e:
                if e.code == 404:           # the project exists from its first span on
                    return []
                raise
            for sp in page["data"]:
                sp["attributes"] = flat(sp.get("attributes") or {})
            out += page["data"]
            cursor = page.get("next_cursor")
            if not cursor:
                break
        return [s for s in out if trace_id is None or s["context"]["trace_id"] == trace_id]


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    p = Phoenix(tmp_path_factory.mktemp("phoenix"))
    yield p
    p.proc.stop()


def stack(env, tmp: Path, phoenix: Phoenix) -> tuple[ApiStack, Path]:
    marker = tmp / "deployed.json"
    s = ApiStack(env, tmp, config=CONFIG.format(marker=marker, endpoint=phoenix.url))
    return s, marker


def metrics(s: ApiStack) -> str:
    with urllib.request.urlopen(s.run.daemon_ready["url"] + "metrics", timeout=10) as r:
        return r.read().decode()


def sample(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def approve_when_held(s: ApiStack) -> dict:
    card = pending(s.api)
    status, body = s.api.call("POST", f"/v1/approvals/{card['id']}", {"decision": "approve", "reason": "ship it"})
    assert status == 200 and body["state"] == "approved", body
    return card


@pytest.fixture(autouse=True)
def project_env(monkeypatch):
    # Read by the daemon's OpenTelemetry resource (OTEL_RESOURCE_ATTRIBUTES), so its traces land
    # in a project of their own in Phoenix.
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"openinference.project.name={PROJECT}")


def test_a_turn_with_two_tool_calls_and_an_approval_is_a_trace_in_phoenix(setup_env, tmp_path, phoenix):
    s, marker = stack(setup_env, tmp_path, phoenix)
    s.backend.post_script(SCRIPT)
    sid = s.session()
    send(s, sid, "deploy, then echo ping")
    card = approve_when_held(s)
    run_id = card["run_id"]
    evs = run_events(s.api, run_id)
    assert evs[-1]["type"] == "completed" and evs[-1]["status"] == "finished", evs
    assert json.loads(marker.read_text()) == {"env": "prod"}

    deadline = time.monotonic() + 30
    while True:
        spans = [sp for sp in phoenix.spans() if sp["attributes"].get("callbackd.run_id") == run_id]
        if len(spans) >= 4 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    agent = [sp for sp in spans if sp["name"] == f"invoke_agent {sid}"][0]
    trace_id = agent["context"]["trace_id"]
    whole = phoenix.spans(trace_id)
    names = sorted(sp["name"] for sp in whole)
    assert names == sorted([f"invoke_agent {sid}", "execute_tool deploy", "execute_tool echo", "approval deploy"]), names
    by_name = {sp["name"]: sp for sp in whole}
    a = agent["attributes"]
    # Phoenix takes openinference.span.kind as the span's kind.
    assert agent["span_kind"] == "AGENT" and agent["status_code"] == "OK", agent
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert a["gen_ai.agent.id"] == sid and a["gen_ai.conversation.id"] == sid
    assert a["gen_ai.request.model"] == a["llm.model_name"] and a["gen_ai.request.model"], a
    assert a["gen_ai.usage.input_tokens"] == 20 and a["gen_ai.usage.output_tokens"] == 12, a
    assert a["llm.token_count.prompt"] == 20 and a["llm.token_count.completion"] == 12, a
    assert a["input.value"] == "deploy, then echo ping", a
    assert "ping" in a["output.value"], a
    assert agent["parent_id"] is None
    deploy, echo, approval = by_name["execute_tool deploy"], by_name["execute_tool echo"], by_name["approval deploy"]
    for tool in (deploy, echo):
        assert tool["parent_id"] == agent["context"]["span_id"], tool
        assert tool["span_kind"] == "TOOL" and tool["attributes"]["gen_ai.tool.call.id"], tool
        assert tool["attributes"]["callbackd.tool.outcome"] == "ok", tool
        assert tool["status_code"] == "OK", tool
    assert json.loads(deploy["attributes"]["input.value"]) == {"env": "prod"}
    assert approval["parent_id"] == deploy["context"]["span_id"] and approval["span_kind"] == "GUARDRAIL", approval
    p = approval["attributes"]
    assert p["callbackd.approval.decision"] == "approved" and p["callbackd.approval.decided_by"] == "default/api", p
    assert p["callbackd.approval.reason"] == "ship it", p
    # The approval wait is inside its tool call, the tool calls inside the run.
    assert deploy["start_time"] <= approval["start_time"] <= approval["end_time"] <= deploy["end_time"]
    assert agent["start_time"] <= deploy["start_time"] and echo["end_time"] <= agent["end_time"]
    assert sample(metrics(s), "callbackd_telemetry_spans_exported_total") >= 4
    assert sample(metrics(s), "callbackd_telemetry_spans_dropped_total") == 0
    s.stop()


def test_a_collector_stopped_mid_run_costs_only_the_spans_counted_in_metrics(setup_env, tmp_path, phoenix):
    s, marker = stack(setup_env, tmp_path, phoenix)
    s.backend.post_script(SCRIPT)
    sid = s.session()
    send(s, sid, "deploy, then echo ping")
    card = pending(s.api)
    # The collector goes away while the run waits for its approval.
    phoenix.proc.stop()
    status, body = s.api.call("POST", f"/v1/approvals/{card['id']}", {"decision": "approve"})
    assert status == 200 and body["state"] == "approved", body
    evs = run_events(s.api, card["run_id"])
    # The run, its store calls and both tool calls went as without telemetry.
    assert evs[-1]["type"] == "completed" and evs[-1]["status"] == "finished", evs
    assert "ping" in evs[-1]["output"], evs[-1]
    assert json.loads(marker.read_text()) == {"env": "prod"}
    status, run = s.api.call("GET", f"/v1/runs/{card['run_id']}")
    assert [c["outcome"] for c in run["tool_calls"]] == ["ok", "ok"], run
    assert run["last_seq"] == evs[-1]["seq"], run
    deadline = time.monotonic() + 30
    while sample(metrics(s), "callbackd_telemetry_spans_dropped_total") < 4 and time.monotonic() < deadline:
        time.sleep(0.5)
    m = metrics(s)
    assert sample(m, "callbackd_telemetry_spans_dropped_total") == 4, m
    assert sample(m, "callbackd_telemetry_spans_exported_total") == 0, m
    # A second run: its span is dropped too, and the log does not say so again within the minute.
    s.backend.post_script({"steps": [{"text": "Nothing to do."}], "usage": {"inputTokens": 3, "outputTokens": 2}})
    send(s, sid, "anything else?").join(60)
    deadline = time.monotonic() + 30
    while sample(metrics(s), "callbackd_telemetry_spans_dropped_total") < 5 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert sample(metrics(s), "callbackd_telemetry_spans_dropped_total") == 5
    log = s.run.proc.stderr_text()
    assert log.count("cannot export traces") == 1, log[-3000:]
    assert f"endpoint={phoenix.url}/v1/traces" in log
    status, _ = s.api.call("GET", f"/v1/sessions/{sid}")
    assert status == 200
    s.stop()
