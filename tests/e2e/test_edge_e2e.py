"""Store behaviour the common paths do not reach: a run that fails after retries, and a
conversation long enough that the bridge must page through checkpoints.list."""
from __future__ import annotations

import harness as h

FINISHED = "RUN_LIFECYCLE_STATUS_FINISHED"


def test_failed_run_is_stored_and_agent_recovers(make_stack):
    st = make_stack("error")           # every attempt ends with resource_exhausted; 4 attempts
    c = st.client
    a = c.create_agent(st.ws1, name="unlucky")
    _, r = c.send(a, "hello", timeout=90)
    assert r["status"] == "RUN_LIFECYCLE_STATUS_ERROR", r
    with st.db() as db:
        run = db.run_docs(a)[0]
        assert run["status"] == "error" and run["error"].startswith("[resource_exhausted]"), run
        assert run["endedAt"] is not None and run["startedAt"] is not None, "endedAt of an error run must survive"
        assert db.agent_doc(a)["status"] == "error"
        seqs = db.event_seqs(r["runId"])
        assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) >= 7, seqs
    got = c.call("GetRun", {"runId": r["runId"]})["run"]
    assert got["status"] == "RUN_LIFECYCLE_STATUS_ERROR" and got.get("errorCode"), got
    replay = c.observe(r["runId"])
    assert len(replay) == len(seqs) + 2 and replay[-2]["result"]["status"] == "RUN_LIFECYCLE_STATUS_ERROR"

    # the next turn works (the fake plays a queued script instead of the error scenario)
    st.backend.post_script({"steps": [{"text": "recovered"}], "usage": {"inputTokens": 3, "outputTokens": 1}})
    _, r2 = c.send(a, "try again")
    assert r2["status"] == FINISHED and r2["result"]["result"] == "recovered", r2
    with st.db() as db:
        assert [x["status"] for x in db.run_docs(a)] == ["error", "finished"]
        assert db.agent_doc(a)["status"] == "idle"


def test_long_conversation_pages_checkpoints(make_stack):
    """Each text turn stores ~3 new blobs; past 50 (the default catalog page) the bridge must
    follow checkpoints.list's nextCursor to load the conversation, or the turn fails."""
    st = make_stack("text")
    c = st.client
    a = c.create_agent(st.ws1, name="chatty")
    turns = 20
    for i in range(1, turns + 1):
        _, r = c.send(a, f"message number {i}")
        assert r["status"] == FINISHED, (i, r)
    with st.db() as db:
        n_blobs = len(db.blob_ids(a))
        assert n_blobs > 55, n_blobs
        runs = db.run_docs(a)
        assert [x["turnNumber"] for x in runs] == list(range(1, turns + 1))
        assert runs[-1]["startCheckpointRef"]["rootBlobId"] == runs[-2]["latestCheckpointRef"]["rootBlobId"]
    scripts = [x for x in st.backend.records() if x.get("ev") == "script"]
    assert [x["priorTurns"] for x in scripts] == list(range(turns)), "every turn continued the whole conversation"
    # ListRuns through the bridge, paged by 7
    seen, cursor = [], None
    for _ in range(10):
        page = c.call("ListRuns", {"agentId": a, "options": {"limit": 7, **({"cursor": cursor} if cursor else {})}})
        seen += [x["runId"] for x in page["items"]]
        cursor = page.get("nextCursor")
        if not cursor:
            break
    assert seen == [x["runId"] for x in runs]
