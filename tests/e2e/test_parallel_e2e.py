"""Issue 4, end to end: three agents in parallel, each two tool turns, through one bridge and
one callbackd. Every run must finish, and no agent may see another agent's tool calls, events
or checkpoints.
"""
from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor

FINISHED = "RUN_LIFECYCLE_STATUS_FINISHED"
ECHO_DECL = {"echo": {"description": "Echo the arguments back", "inputSchema": {"type": "object"}}}


def test_three_agents_in_parallel_two_tool_turns_each(make_stack):
    st = make_stack("tool")
    c = st.client
    agents = [c.create_agent(st.ws1 if i < 2 else st.ws2, name=f"parallel {i}", custom_tools=ECHO_DECL) for i in range(3)]

    def two_turns(agent_id):
        out = []
        for turn in (1, 2):
            _, res = c.send(agent_id, f"Turn {turn} of {agent_id}: call the echo tool.")
            out.append(res)
        return out

    with ThreadPoolExecutor(3) as pool:
        results = dict(zip(agents, pool.map(two_turns, agents)))

    for agent_id, runs in results.items():
        for r in runs:
            assert r["status"] == FINISHED and r["agentId"] == agent_id, r

    # the backend saw 6 tool calls, each answered once
    assert len(st.backend.mcp_results()) == 6

    with st.db() as db:
        all_blobs = {}
        for agent_id, runs in results.items():
            docs = db.run_docs(agent_id)
            assert [(d["runId"], d["turnNumber"], d["status"]) for d in docs] == \
                [(r["runId"], i, "finished") for i, r in enumerate(runs, start=1)]
            for r in runs:
                rows = db.query("SELECT seq, payload FROM run_events WHERE run_id = ? ORDER BY seq", (r["runId"],))
                assert [row["seq"] for row in rows] == list(range(1, 9)), r["runId"]
                for row in rows:
                    p = json.loads(row["payload"])
                    assert p["agentId"] == agent_id and p["runId"] == r["runId"], p
            # every blob of the agent is intact (blobId = sha256 of the bytes) and its own
            blobs = {row["blob_id"]: bytes(row["data"]) for row in
                     db.query("SELECT blob_id, data FROM checkpoints WHERE agent_id = ?", (agent_id,))}
            for blob_id, data in blobs.items():
                assert hashlib.sha256(data).hexdigest() == blob_id
            root = db.agent_doc(agent_id)["latestCheckpoint"]["rootBlobId"]
            assert root in blobs and docs[-1]["latestCheckpointRef"]["rootBlobId"] == root
            all_blobs[agent_id] = blobs
        # the prompts differ per agent, so their user-message blobs differ
        a, b, cc = (set(all_blobs[x]) for x in agents)
        assert a - b - cc and b - a - cc and cc - a - b

    # each agent's second turn continued its own conversation
    scripts = [r for r in st.backend.records() if r.get("ev") == "script"]
    assert sorted(s["priorTurns"] for s in scripts) == [0, 0, 0, 1, 1, 1]
    # and the bridge can read each agent's checkpoint back through callbackd
    for agent_id, runs in results.items():
        c.call("GetRun", {"runId": runs[1]["runId"], **({"options": {"cwd": str(st.ws2)}} if agent_id == agents[2] else {})})

    # last, as it needs callbackd's echo tool: every tool call succeeded and got its own args back
    for r in st.backend.mcp_results():
        assert "success" in r, f"a tool call failed: {r}"
        assert r["success"].get("structuredContent") == {"text": "ping"}, r
