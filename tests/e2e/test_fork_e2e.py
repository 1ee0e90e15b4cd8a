"""Issue 22, end to end, on SQLite and PostgreSQL: a session of the real bridge forked after
the first of its three turns; a message on the fork finishes, and what the bridge sends the
fake backend for it carries turn 1 and nothing of turns 2 and 3; the source still carries
three; a retry of turn 2 resends its prompt from the state after turn 1; deleting the source
leaves the fork working.
"""
from __future__ import annotations

import json
import secrets

from test_run_api_e2e import ApiStack, read_all, types

PROMPTS = ["first question zebra", "second question walrus", "third question narwhal"]


def send(s, sid: str, text: str) -> dict:
    c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": text})
    assert r.status == 200, r.read()
    fs = read_all(r)
    c.close()
    assert types(fs)[-1] == "completed", types(fs)
    return [d for kind, _, d, _ in fs if kind == "event" and d["type"] == "completed"][0]


def turns_sent(s, start: int) -> list[list[str]]:
    """The `conversationState.turns` of each run request the bridge sent after record `start`."""
    out = []
    for r in s.backend.records()[start:]:
        text = json.dumps(r.get("msg", {}))
        if '"conversationState"' in text:
            state = json.loads(text.split('"conversationState": ', 1)[1].split(', "action"', 1)[0])
            out.append(state.get("turns", []))
    return out


def requests_text(s, start: int) -> str:
    """What the bridge sent the backend in the RunSSE requests logged after record `start`."""
    recs = s.backend.records()[start:]
    return "\n".join(json.dumps(r) for r in recs if r.get("dir") == "C->S")


def test_a_fork_after_turn_one_carries_turn_one_only_and_outlives_its_source(setup_env, tmp_path):
    s = ApiStack(setup_env, tmp_path, scenario="text")
    sid, fid = fork_after_turn_one(s)

    # Deleting the source (every row of it) leaves the fork working.
    import sqlite3
    with sqlite3.connect(s.db) as db:
        for table in ("checkpoints", "runs", "agents"):
            db.execute(f"DELETE FROM {table} WHERE agent_id = ?", (sid,))
    mark = len(s.backend.records())
    assert send(s, fid, "sixth question on the fork")["status"] == "finished"
    assert len(turns_sent(s, mark)[0]) == 2


def test_a_fork_on_postgres(setup_env, tmp_path):
    # `--db` picks the backend and ApiStack passes the SQLite file: this Stack passes the
    # PostgreSQL URL and fails if a SQLite file appears, so the test cannot pass on SQLite.
    from test_approvals_bound_e2e import Stack
    schema = "e2e_fork_" + secrets.token_hex(6)
    config = f'[store]\nschema = "{schema}"\npath = "{tmp_path / "data" / "callbackd.db"}"\n'
    s = Stack(setup_env, tmp_path, "postgres", scenario="text", config=config)
    fork_after_turn_one(s)


def fork_after_turn_one(s) -> tuple[str, str]:
    """Three turns, a fork after turn 1, a message on the fork and one on the source."""
    sid = s.session()
    runs, marks = [], []
    for p in PROMPTS:
        marks.append(len(s.backend.records()))
        runs.append(send(s, sid, p)["run_id"])
    after_turn_1 = turns_sent(s, marks[1])[0]
    assert len(after_turn_1) == 1
    status, forked = s.api.call("POST", f"/v1/sessions/{sid}/fork", {"run_id": runs[0], "at": "after"})
    assert status == 201, forked
    fid = forked["session"]["session_id"]
    assert forked["session"]["forked_from"] == {"session_id": sid, "run_id": runs[0], "at": "after"}

    mark = len(s.backend.records())
    done = send(s, fid, "fourth question on the fork")
    assert done["status"] == "finished"
    sent = requests_text(s, mark)
    assert "fourth question on the fork" in sent
    # Turn 1's conversation (its turn, by id) and nothing of turns 2 and 3.
    assert turns_sent(s, mark) == [after_turn_1]
    for later in PROMPTS[1:]:
        assert later not in sent, later
    status, runs_of_fork = s.api.call("GET", f"/v1/sessions/{fid}/runs")
    # The bridge numbers a fork's turns from its own runs.
    assert [r["turn_number"] for r in runs_of_fork["runs"]] == [1], runs_of_fork

    # The source still carries its three turns.
    mark = len(s.backend.records())
    send(s, sid, "fifth question on the source")
    assert len(turns_sent(s, mark)[0]) == 3
    status, runs_of_source = s.api.call("GET", f"/v1/sessions/{sid}/runs")
    assert [r["turn_number"] for r in runs_of_source["runs"]] == [1, 2, 3, 4]

    # Retry of turn 2: its prompt again, from the state after turn 1, in a new session.
    mark = len(s.backend.records())
    c, r = s.api.open("POST", f"/v1/runs/{runs[1]}/retry", {"text": PROMPTS[1]})
    assert r.status == 200, r.read()
    rid = r.getheader("callbackd-session-id")
    fs = read_all(r)
    c.close()
    assert types(fs)[-1] == "completed", types(fs)
    assert rid not in (sid, fid)
    assert turns_sent(s, mark) == [after_turn_1]
    assert PROMPTS[1] in requests_text(s, mark)
    status, retried = s.api.call("GET", f"/v1/sessions/{rid}")
    assert retried["forked_from"] == {"session_id": sid, "run_id": runs[1], "at": "before"}
    return sid, fid
