"""callbackd's CallStore and CallCustomTool called through the bridge's own Connect client
library (connect-es 1.6.1 + protobuf-es 1.10.0 from the cursor-sdk==1.1.0 wheel), JSON codec,
HTTP/1.1, configured as the bridge configures it. The client is connect_client.mjs; it prints
one JSON object with the outcome of every step, asserted on here.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

import harness as h


@pytest.fixture(scope="module")
def steps(setup_env, tmp_path_factory) -> dict:
    workdir = tmp_path_factory.mktemp("connect_es")
    refdir = os.environ.get("E2E_REFERENCE_DIR")
    daemon = h.ReferenceServers(workdir, Path(refdir)) if refdir else h.Callbackd(workdir, workdir / "callbackd.db")
    start = len(h.Proc.registry)
    try:
        daemon.start()
        argv = [setup_env["NODE"], str(h.HERE / "connect_client.mjs"), daemon.store_url, daemon.store_token,
                daemon.tool_token, daemon.tool_url]
        res = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                             env={**os.environ, "BRIDGE_DIR": setup_env["BRIDGE_DIR"]}, start_new_session=True)
        assert res.returncode == 0, f"connect_client.mjs failed ({res.returncode}):\n{res.stderr.decode()[-3000:]}"
        return json.loads(res.stdout)
    finally:
        for p in h.Proc.registry[start:]:
            p.stop()


def output(steps, name):
    s = steps[name]
    assert "error" not in s, f"{name} failed: {s['error']}"
    return s["output"]


def error(steps, name) -> dict:
    s = steps[name]
    assert "error" in s, f"{name} should have failed, got output {json.dumps(s.get('output'))[:500]}"
    return s["error"]


def test_agents_roundtrip(steps):
    a, b, a2 = steps["agentA"], steps["agentB"], steps["agentA2"]
    assert output(steps, "agents.get.miss") is None, "a get miss must be an unset output"
    assert output(steps, "agents.create") == a
    assert error(steps, "agents.create.duplicate")["codeName"] == "already_exists"
    assert output(steps, "agents.get") == a, "documents must come back unchanged (unknown keys, nulls, numbers)"
    assert output(steps, "agents.create.b") == b
    assert output(steps, "agents.list") == {"items": [b, a]}, "updatedAt desc, no nextCursor on the last page"
    p1 = output(steps, "agents.list.page1")
    assert p1["items"] == [b] and isinstance(p1.get("nextCursor"), str) and p1["nextCursor"], p1
    assert output(steps, "agents.list.page2") == {"items": [a]}
    assert output(steps, "agents.update") == a2
    assert output(steps, "agents.get.updated") == a2, "update replaces the whole document"
    assert output(steps, "agents.delete") is None
    assert output(steps, "agents.get.deleted") is None


def test_run_events_roundtrip(steps):
    run_id = steps["runId"]
    e1, e2, e3 = (output(steps, f"runEvents.append.{i}") for i in (1, 2, 3))
    for i, e in enumerate((e1, e2, e3), start=1):
        assert e["runId"] == run_id and e["seq"] == i and e["offset"] == str(i), e
        assert e["eventType"] == "run_stream_event" and isinstance(e["createdAt"], (int, float)), e
    assert e1["payload"] == {"n": 1, "text": "first"} and e2["payload"] == {"n": 2}
    assert e3["payload"] is None and e3["idempotencyKey"] == "k3"
    assert output(steps, "runEvents.append.3again") == e3, "an append with a known idempotencyKey returns the existing event"
    assert output(steps, "runEvents.list") == {"items": [e1, e2, e3]}
    assert output(steps, "runEvents.list.after1") == {"items": [e2, e3]}
    assert output(steps, "runEvents.list.limit1") == {"items": [e1], "nextOffset": "1"}
    assert output(steps, "runEvents.list.after3") == {"items": []}, "no nextOffset on an empty page"
    assert output(steps, "runEvents.delete") is None


def test_checkpoints_roundtrip(steps):
    blob_id, data = steps["blob"]["blobId"], steps["blob"]["data"]
    assert hashlib.sha256(base64.b64decode(data)).hexdigest() == blob_id
    miss = output(steps, "checkpoints.get.miss")
    assert miss == {"found": False}, f"a checkpoint miss is {{found: false}} (callback-contract.md): {miss}"
    assert output(steps, "checkpoints.create") is None, "checkpoint create is a null result"
    got = output(steps, "checkpoints.get")
    assert got["found"] is True and base64.b64decode(got["data"]) == base64.b64decode(data), got
    assert got["data"] == data, "standard padded base64"
    assert output(steps, "checkpoints.list") == {"items": [blob_id]}
    assert output(steps, "checkpoints.delete") is None


def test_store_rejects_tool_token(steps):
    assert error(steps, "store.wrongToken")["codeName"] == "unauthenticated"


def test_echo_tool_returns_args_unchanged(steps):
    assert output(steps, "tool.echo") == steps["echoArgs"]
    assert output(steps, "tool.echo.noCallId") == {"text": "no call id"}


def test_tool_errors(steps):
    e = error(steps, "tool.unknown")
    assert e["codeName"] == "not_found" and "no_such_tool_" in e["message"], e
    assert error(steps, "tool.storeToken")["codeName"] == "unauthenticated"
