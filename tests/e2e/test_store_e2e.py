"""Issue 2, end to end: the real cursor-sdk 1.1.0 bridge keeps all agent state in callbackd.

Each test drives the bridge's own SdkAgentService (Connect JSON) against a fake Cursor backend,
and checks what callbackd stored in its SQLite database.
"""
from __future__ import annotations

import pytest

import harness as h

FINISHED = "RUN_LIFECYCLE_STATUS_FINISHED"
ECHO_DECL = {"echo": {"description": "Echo the arguments back", "inputSchema": {"type": "object"}}}


def ids(items):
    return [i["agentId"] for i in items]


def offsets(msgs):
    return [m.get("offset") for m in msgs]


def check_observe_replay(client, run_id: str, n_events: int, cwd=None) -> list[dict]:
    """ObserveRun from the start replays every durable event, then result and done, with client
    offsets 1..n+2; after an offset it returns exactly the rest of the same sequence.
    A run this bridge still holds live from its own Send is answered from memory (result and
    done only, no store call); GetRun first makes the bridge read it from the store."""
    client.call("GetRun", {"runId": run_id, **({"options": {"cwd": str(cwd)}} if cwd else {})})
    full = client.observe(run_id)
    assert offsets(full) == [str(i) for i in range(1, len(full) + 1)], full
    assert len(full) == n_events + 2, [list(m) for m in full]
    assert full[0]["sdkMessage"]["type"] == "request", full[0]
    assert "result" in full[-2] and full[-2]["result"]["status"] == FINISHED, full[-2]
    assert "done" in full[-1], full[-1]
    for after in ("3", str(len(full) - 2)):
        rest = client.observe(run_id, after_offset=after)
        assert rest == full[int(after):], f"ObserveRun after_offset={after}"
    return full


def test_agents_runs_and_paging_in_two_workspaces(make_stack):
    st = make_stack("auto")
    c = st.client

    # CreateAgent x3 in two workspaces (the bridge's --workspace is ws1)
    a1 = c.create_agent(st.ws1, name="one", custom_tools=ECHO_DECL)
    a2 = c.create_agent(st.ws1, name="two")
    a3 = c.create_agent(st.ws2, name="three")
    assert len({a1, a2, a3}) == 3

    # Send: a tool turn, a text turn, a text turn in the other workspace
    _, r1 = c.send(a1, "Say hello, then call the echo tool.")
    _, r2 = c.send(a2, "Say hello.")
    _, r3 = c.send(a3, "Say hello.")
    for r in (r1, r2, r3):
        assert r["status"] == FINISHED, r
    assert r2["result"]["result"] == "Hello from the fake model."

    # What callbackd stored
    with st.db() as db:
        assert {a1, a2, a3} <= {r["agent_id"] for r in db.query("SELECT agent_id FROM agents")}
        doc = db.agent_doc(a1)
        assert doc["cwd"] == str(st.ws1) and doc["status"] == "idle" and doc["activeRunId"] is None
        assert len(doc["sdkMetadata"]["blobEncryptionKey"]) == 64, doc
        root = doc["latestCheckpoint"]["rootBlobId"]
        runs = db.run_docs(a1)
        assert [(r["runId"], r["turnNumber"], r["status"]) for r in runs] == [(r1["runId"], 1, "finished")]
        assert runs[0]["latestCheckpointRef"]["rootBlobId"] == root
        # tool turn: request, RUNNING, assistant, tool_call x2, assistant, usage, FINISHED
        assert db.event_seqs(r1["runId"]) == list(range(1, 9))
        blobs = db.blob_ids(a1)
        assert root in blobs and len(blobs) == 6, blobs
        assert db.agent_doc(a3)["cwd"] == str(st.ws2)

    # ListAgents per workspace, unpaged and paged with limit 1 + cursor
    assert sorted(ids(c.list_agents(st.ws1)["items"])) == sorted([a1, a2])
    assert ids(c.list_agents(st.ws2)["items"]) == [a3]
    items, pages = c.list_all_agents(st.ws1, limit=1)
    assert sorted(ids(items)) == sorted([a1, a2]) and pages == 2, (ids(items), pages)
    # newest first: a2's turn ended after a1's
    assert ids(items) == [a2, a1]
    items, pages = c.list_all_agents(st.ws2, limit=1)
    assert ids(items) == [a3] and pages == 1
    first = c.list_agents(st.ws1, limit=1)
    assert len(first["items"]) == 1 and first.get("nextCursor")

    # A second turn on a1, then ListRuns (oldest first), also paged
    _, r1b = c.send(a1, "Now just say hi.")
    assert r1b["status"] == FINISHED
    runs = c.call("ListRuns", {"agentId": a1})["items"]
    assert [r["runId"] for r in runs] == [r1["runId"], r1b["runId"]]
    assert all(r["status"] == FINISHED for r in runs)
    p1 = c.call("ListRuns", {"agentId": a1, "options": {"limit": 1}})
    assert [r["runId"] for r in p1["items"]] == [r1["runId"]] and p1.get("nextCursor"), p1
    p2 = c.call("ListRuns", {"agentId": a1, "options": {"limit": 1, "cursor": p1["nextCursor"]}})
    assert [r["runId"] for r in p2["items"]] == [r1b["runId"]] and not p2.get("nextCursor"), p2
    with st.db() as db:
        assert [(r["turnNumber"], r["status"]) for r in db.run_docs(a1)] == [(1, "finished"), (2, "finished")]
        # turn 2 started from turn 1's checkpoint
        t2 = db.run_docs(a1)[1]
        assert t2["startCheckpointRef"]["rootBlobId"] == root
        assert db.agent_doc(a1)["latestCheckpoint"]["rootBlobId"] == t2["latestCheckpointRef"]["rootBlobId"] != root

    # GetRun (located through agents.list in the run's workspace)
    got = c.call("GetRun", {"runId": r1["runId"]})["run"]
    assert got["status"] == FINISHED and got["agentId"] == a1 and got["result"] == r1["result"]["result"]
    got3 = c.call("GetRun", {"runId": r3["runId"], "options": {"cwd": str(st.ws2)}})["run"]
    assert got3["agentId"] == a3 and got3["status"] == FINISHED

    # ObserveRun from the start and after an offset
    check_observe_replay(c, r1["runId"], 8)
    check_observe_replay(c, r2["runId"], 5)

    # The turn-2 prompt reached the backend together with turn 1's conversation
    scripts = [r for r in st.backend.records() if r.get("ev") == "script"]
    assert [s["priorTurns"] for s in scripts] == [0, 0, 0, 1], scripts


def test_archive_unarchive_resume_delete(make_stack):
    st = make_stack("text")
    c = st.client
    a = c.create_agent(st.ws1, name="doomed")
    b = c.create_agent(st.ws1, name="survivor")
    _, ra = c.send(a, "hello")
    _, rb = c.send(b, "hello")
    assert ra["status"] == rb["status"] == FINISHED
    _, ra2 = c.send(a, "again")
    assert ra2["status"] == FINISHED

    # Archive: stored, listed as archived, and Send is refused
    c.call("ArchiveAgent", {"agentId": a})
    with st.db() as db:
        assert db.agent_doc(a)["status"] == "archived"
    listed = {i["agentId"]: i for i in c.list_agents(st.ws1, include_archived=True)["items"]}
    assert listed[a].get("archived") is True and not listed[b].get("archived"), listed
    with pytest.raises(h.ConnectError) as e:
        c.send(a, "are you there?")
    assert "archived" in e.value.message.lower(), e.value

    # Unarchive, Resume, Send again
    c.call("UnarchiveAgent", {"agentId": a})
    with st.db() as db:
        assert db.agent_doc(a)["status"] == "idle"
    assert not {i["agentId"]: i for i in c.list_agents(st.ws1)["items"]}[a].get("archived")
    assert c.resume_agent(a, st.ws1)["agentId"] == a
    _, ra3 = c.send(a, "back again")
    assert ra3["status"] == FINISHED
    assert c.call("GetAgent", {"agentId": a})["agent"]["agentId"] == a

    # DeleteAgent: nothing of `a` is left in any table; `b` is untouched
    run_ids = [r["runId"] for r in c.call("ListRuns", {"agentId": a})["items"]]
    assert len(run_ids) == 3
    with st.db() as db:
        before_b = db.rows_for_agent(b, [rb["runId"]])
        assert db.rows_for_agent(a, run_ids)
    c.call("DeleteAgent", {"agentId": a})
    with st.db() as db:
        assert db.rows_for_agent(a, run_ids) == {}, "rows of the deleted agent are left"
        assert db.rows_for_agent(b, [rb["runId"]]) == before_b
    with pytest.raises(h.ConnectError) as e:
        c.call("GetAgent", {"agentId": a})
    assert e.value.code == "not_found", e.value
    assert ids(c.list_agents(st.ws1, include_archived=True)["items"]) == [b]
    with pytest.raises(h.ConnectError):
        c.call("DeleteAgent", {"agentId": a})

    # An agent that never ran: its queued turn-1 run must be cancelled before it can be deleted
    q = c.create_agent(st.ws1, name="never ran")
    queued = c.call("ListRuns", {"agentId": q})["items"]
    assert len(queued) == 1, queued
    c.call("CancelRun", {"runId": queued[0]["runId"], "agentId": q})
    with st.db() as db:
        assert db.run_docs(q)[0]["status"] == "cancelled"
    c.call("DeleteAgent", {"agentId": q})
    with st.db() as db:
        assert db.rows_for_agent(q, [queued[0]["runId"]]) == {}
        assert db.rows_for_agent(b, [rb["runId"]]) == before_b


def test_state_survives_restart_of_bridge_and_daemon(make_stack):
    st = make_stack("auto")
    c = st.client
    a1 = c.create_agent(st.ws1, name="tooly", custom_tools=ECHO_DECL)
    a2 = c.create_agent(st.ws2, name="other workspace")
    _, r1 = c.send(a1, "Say hello, then call the echo tool.")
    _, r2 = c.send(a2, "Say hello.")
    assert r1["status"] == r2["status"] == FINISHED
    run_before = c.call("GetRun", {"runId": r1["runId"]})["run"]
    observed = check_observe_replay(c, r1["runId"], 8)
    tables, counts_before, docs_before = [], {}, {}
    with st.db() as db:
        tables = db.tables()
        counts_before = {t: db.count(t) for t in tables}
        docs_before = {a: db.agent_doc(a) for a in (a1, a2)}

    st.restart_all()          # SIGTERM bridge and daemon; new daemon on the same db; new bridge
    c = st.client

    with st.db() as db:
        assert {t: db.count(t) for t in tables} == counts_before
        assert {a: db.agent_doc(a) for a in (a1, a2)} == docs_before

    # Read RPCs work on a fresh bridge before any resume
    assert ids(c.list_agents(st.ws1)["items"]) == [a1]
    assert ids(c.list_agents(st.ws2)["items"]) == [a2]
    assert c.call("GetRun", {"runId": r1["runId"]})["run"] == run_before
    assert c.observe(r1["runId"]) == observed
    assert c.call("GetRun", {"runId": r2["runId"], "options": {"cwd": str(st.ws2)}})["run"]["status"] == FINISHED

    # Resume (tools must be re-declared), then GetRun, ObserveRun and a second turn
    assert c.resume_agent(a1, st.ws1, custom_tools=ECHO_DECL)["agentId"] == a1
    assert c.call("GetRun", {"runId": r1["runId"]})["run"]["status"] == FINISHED
    check_observe_replay(c, r1["runId"], 8)
    _, r1b = c.send(a1, "Call the echo tool again.")
    assert r1b["status"] == FINISHED, r1b
    runs = c.call("ListRuns", {"agentId": a1})["items"]
    assert [r["runId"] for r in runs] == [r1["runId"], r1b["runId"]]
    # turn 2 went to the backend with turn 1's conversation, loaded from callbackd
    scripts = [r for r in st.backend.records() if r.get("ev") == "script"]
    assert [s["priorTurns"] for s in scripts] == [0, 0, 1], scripts
    check_observe_replay(c, r1b["runId"], 8)

    # the other workspace's agent resumes too
    assert c.resume_agent(a2, st.ws2)["agentId"] == a2
    _, r2b = c.send(a2, "Say hello again.")
    assert r2b["status"] == FINISHED
    with st.db() as db:
        assert [r["turnNumber"] for r in db.run_docs(a1)] == [1, 2]
        assert [r["turnNumber"] for r in db.run_docs(a2)] == [1, 2]
        assert db.event_seqs(r1b["runId"]) == list(range(1, 9))
        key = docs_before[a1]["sdkMetadata"]["blobEncryptionKey"]
        assert db.agent_doc(a1)["sdkMetadata"]["blobEncryptionKey"] == key
