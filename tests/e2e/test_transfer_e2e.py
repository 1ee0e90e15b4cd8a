"""`callbackd import` / `export` with the real bridge: a bridge on its built-in JSONL store runs
a turn; the directory is imported into callbackd; a bridge on callbackd resumes the agent and
runs a turn from its checkpoint; the database is exported back to JSONL; a bridge on that
directory resumes the agent and runs a third turn. The fake backend's `priorTurns` shows that
each resumed turn saw the conversation so far (it comes from the checkpoint the store gave back).
"""
from __future__ import annotations

import json
import signal
import subprocess
import urllib.request
from pathlib import Path

import harness as h

FINISHED = "RUN_LIFECYCLE_STATUS_FINISHED"
FILES = ("agents.ndjson", "runs.ndjson", "run_events.ndjson", "checkpoints.ndjson")


class JsonlBridge:
    """The real bridge on its own JSONL store (`--local-store '{"type":"jsonl","rootDir":D}'`),
    no callbacks."""

    def __init__(self, env: dict, workdir: Path, workspace: Path, backend: h.FakeBackend, root: Path, name: str):
        state, tmp = workdir / f"{name}-state", workdir / "tmp"
        for d in (state, tmp, workspace):
            d.mkdir(parents=True, exist_ok=True)
        argv = [env["NODE"], Path(env["BRIDGE_DIR"]) / "dist" / "bin" / "cursor-sdk-bridge.js",
                "--host", "127.0.0.1", "--port", "0", "--workspace", workspace, "--state-root", state,
                "--local-store", json.dumps({"type": "jsonl", "rootDir": str(root)}), "--verbose"]
        self.proc = h.Proc(name, argv, workdir / "logs", cwd=workspace,
                           env={"CURSOR_BACKEND_URL": backend.url, "CURSOR_API_KEY": "dummy", "TMPDIR": str(tmp)})
        ready = json.loads(self.proc.wait_for_line("cursor-sdk-bridge ready ", timeout=60))
        self.client = h.BridgeClient(ready["url"], Path(ready["authTokenFile"]).read_text().strip())

    def stop(self):
        assert self.proc.stop(signal.SIGTERM) is not None


def callbackd(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(h.callbackd_bin()), *map(str, args)], capture_output=True, text=True, timeout=120)


def prior_turns(backend: h.FakeBackend) -> list[int]:
    return [r["priorTurns"] for r in backend.records() if r.get("ev") == "script"]


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_jsonl_store_to_callbackd_and_back_with_the_real_bridge(setup_env, tmp_path):
    backend = h.FakeBackend(setup_env, tmp_path, "auto")
    ws = tmp_path / "ws"
    jsonl1, jsonl2 = tmp_path / "jsonl1", tmp_path / "jsonl2"
    db = tmp_path / "data" / "callbackd.db"

    # 1. A turn on the bridge's own JSONL store.
    b = JsonlBridge(setup_env, tmp_path, ws, backend, jsonl1, "jsonl-bridge1")
    agent = b.client.create_agent(ws, name="mover")
    _, r1 = b.client.send(agent, "Say hello.")
    assert r1["status"] == FINISHED, r1
    b.stop()
    assert all((jsonl1 / f).exists() for f in FILES), sorted(p.name for p in jsonl1.iterdir())
    events1 = lines(jsonl1 / "run_events.ndjson")
    assert events1 and [e["seq"] for e in events1] == list(range(1, len(events1) + 1))

    # 2. Into callbackd, in one go; a second import of the same ids is refused and changes nothing.
    imp = callbackd("import", "--db", db, jsonl1)
    assert imp.returncode == 0, imp.stderr
    assert f"1 agents, 1 runs, {len(events1)} run events" in imp.stderr, imp.stderr
    again = callbackd("import", "--db", db, jsonl1)
    assert again.returncode != 0 and "already exist" in again.stderr and "--replace" in again.stderr, again.stderr
    with h.DB(db) as d:
        assert d.count("run_events") == len(events1)
    assert callbackd("import", "--replace", "--db", db, jsonl1).returncode == 0

    # 3. The bridge on callbackd resumes the agent from the imported checkpoint and runs turn 2.
    daemon = h.Callbackd(tmp_path, db).start()
    bridge = h.Bridge(setup_env, tmp_path, ws, backend, daemon, name="callbackd-bridge")
    c = bridge.client
    assert c.resume_agent(agent, ws)["agentId"] == agent
    assert [r["runId"] for r in c.call("ListRuns", {"agentId": agent})["items"]] == [r1["runId"]]
    replay = [m for m in c.observe(r1["runId"]) if "result" not in m]
    assert replay, "the imported run's events replay through callbackd"
    _, r2 = c.send(agent, "Say hello again.")
    assert r2["status"] == FINISHED, r2
    # /metrics saw the real bridge's calls: every append of turn 2 (the imported ones were not
    # calls), and the checkpoint reads of the resume.
    with urllib.request.urlopen(daemon.url + "metrics", timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        metrics = resp.read().decode()
    with h.DB(db) as d:
        appended = d.count("run_events") - len(events1)
    assert appended > 0
    assert f"callbackd_events_appended_total {appended}\n" in metrics, metrics
    assert f'callbackd_store_call_duration_seconds_count{{namespace="default",call="runEvents.append",outcome="ok"}} {appended}\n' in metrics
    assert 'callbackd_store_call_duration_seconds_count{namespace="default",call="checkpoints.get",outcome="ok"}' in metrics
    bridge.stop()
    daemon.stop()
    chk = callbackd("check", "--db", db)
    assert chk.returncode == 0, chk.stdout + chk.stderr

    # 4. Back to JSONL; the bridge on the exported directory resumes and runs turn 3.
    exp = callbackd("export", "--db", db, jsonl2)
    assert exp.returncode == 0, exp.stderr
    assert sorted(p.name for p in jsonl2.iterdir()) == sorted(FILES)
    refused = callbackd("export", "--db", db, jsonl2)
    assert refused.returncode != 0 and "not empty" in refused.stderr, refused.stderr
    b = JsonlBridge(setup_env, tmp_path, ws, backend, jsonl2, "jsonl-bridge2")
    assert b.client.resume_agent(agent, ws)["agentId"] == agent
    runs = b.client.call("ListRuns", {"agentId": agent})["items"]
    assert [r["runId"] for r in runs] == [r1["runId"], r2["runId"]]
    _, r3 = b.client.send(agent, "Third turn: say hello.")
    assert r3["status"] == FINISHED, r3
    b.stop()

    # Each resumed turn saw the turns before it: the checkpoint travelled both ways.
    assert prior_turns(backend) == [0, 1, 2], backend.records()
    # The first run's events came back byte for byte as the bridge first wrote them (same keys,
    # same values), apart from records the bridge itself appended later.
    events2 = [e for e in lines(jsonl2 / "run_events.ndjson") if e["runId"] == r1["runId"]]
    assert events2 == events1
