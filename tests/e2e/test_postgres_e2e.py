"""Issue 11, end to end: two `callbackd run` instances (two real bridges on one workspace path)
on one PostgreSQL database. An agent created through bridge A is listed and resumed through
bridge B, and B's turn goes to the backend with A's conversation, loaded from A's checkpoint.

Needs a PostgreSQL server: CALLBACKD_TEST_PG_URL (scripts/test starts one). Without it the test
is skipped on a developer's machine, and fails in CI (CI=true), where it must run.
"""
from __future__ import annotations

import os
import secrets

import pytest

import harness as h

FINISHED = "RUN_LIFECYCLE_STATUS_FINISHED"


def pg_url() -> str:
    url = os.environ.get("CALLBACKD_TEST_PG_URL", "")
    if not url:
        if h.ci():
            pytest.fail("CI must run the PostgreSQL e2e test: CALLBACKD_TEST_PG_URL is not set")
        pytest.skip("CALLBACKD_TEST_PG_URL is not set")
    return url


def test_two_daemons_on_one_postgres_share_agents_and_checkpoints(setup_env, tmp_path):
    url = pg_url()
    schema = "e2e_" + secrets.token_hex(6)
    config = tmp_path / "callbackd.toml"
    config.write_text(f'[store]\nbackend = "postgres"\nurl = "{url}"\nschema = "{schema}"\n')
    backend = h.FakeBackend(setup_env, tmp_path, "auto")
    ws = tmp_path / "ws"
    runs = []
    for name in ("a", "b"):
        work = tmp_path / name
        # The token file lands next to --db's path; the store itself is the config's URL.
        runs.append(h.CallbackdRun(setup_env, work, ws, backend, url, h.rand_token(), h.rand_token(),
                                   extra_args=["--config", str(config)]))
    a, b = runs[0].client, runs[1].client
    # The ready line names the store the daemon really uses, not the unused SQLite path.
    assert runs[0].daemon_ready["store"].startswith("PostgreSQL postgres://"), runs[0].daemon_ready

    agent = a.create_agent(ws, name="shared")
    _, r1 = a.send(agent, "Say hello.")
    assert r1["status"] == FINISHED, r1

    # B lists A's agent and its run, resumes it, and its turn carries A's conversation.
    assert [x["agentId"] for x in b.list_agents(ws)["items"]] == [agent]
    assert b.call("GetRun", {"runId": r1["runId"]})["run"]["status"] == FINISHED
    # B replays A's run from the shared store: every event, in order, to its result.
    replay = b.observe(r1["runId"])
    offsets = [int(m["offset"]) for m in replay if "offset" in m]
    assert len(offsets) > 2 and offsets == list(range(1, len(offsets) + 1)), replay
    assert replay[-1].get("done", {}).get("runId") == r1["runId"], replay[-1]
    assert b.resume_agent(agent, ws)["agentId"] == agent
    _, r2 = b.send(agent, "Say hello again.")
    assert r2["status"] == FINISHED, r2
    scripts = [r for r in backend.records() if r.get("ev") == "script"]
    assert [s["priorTurns"] for s in scripts] == [0, 1], scripts

    # Both bridges see both turns, in order, from the one store.
    for c in (a, b):
        assert [r["runId"] for r in c.call("ListRuns", {"agentId": agent})["items"]] == [r1["runId"], r2["runId"]]
