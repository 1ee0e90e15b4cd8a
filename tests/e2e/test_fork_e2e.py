"""Issue 22, end to end, on SQLite and PostgreSQL: a session of the real bridge forked after
the first of its three turns; a message on the fork finishes, and what the bridge sends the
fake backend for it carries turn 1 and nothing of turns 2 and 3; the source still carries
three; a retry of turn 2 resends its prompt from the state after turn 1; deleting the source
leaves the fork working.
"""
from __future__ import annotations

import json
import secrets
import time
from pathlib import Path

from test_console_e2e import browser_env  # noqa: F401 (a fixture)
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


def sqlite_rows(db, sid: str) -> list:
    """Every stored row of session `sid` in the SQLite file `db`: its agent document, runs,
    checkpoint blobs (bytes and CRC), run events, kept inputs and event metadata."""
    import sqlite3
    with sqlite3.connect(db) as c:
        runs = "(SELECT run_id FROM runs WHERE agent_id = ?)"
        out = []
        for q in ("SELECT * FROM agents WHERE agent_id = ?",
                  "SELECT * FROM runs WHERE agent_id = ? ORDER BY run_id",
                  "SELECT * FROM checkpoints WHERE agent_id = ? ORDER BY blob_id",
                  f"SELECT * FROM run_events WHERE run_id IN {runs} ORDER BY run_id, seq",
                  f"SELECT * FROM run_inputs WHERE run_id IN {runs} ORDER BY run_id",
                  f"SELECT * FROM event_meta WHERE run_id IN {runs} ORDER BY run_id, seq"):
            rows = c.execute(q, (sid,)).fetchall()
            assert rows or "event_meta" in q, q
            out.append(rows)
        return out


def test_a_fork_after_turn_one_carries_turn_one_only_and_outlives_its_source(setup_env, tmp_path):
    s = ApiStack(setup_env, tmp_path, scenario="text")
    sid, fid = fork_after_turn_one(s, rows=lambda sid: sqlite_rows(s.db, sid))

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
    from test_postgres_e2e import pg_url
    url = pg_url()
    sid, fid = fork_after_turn_one(s, rows=lambda sid: pg_rows(url, schema, sid))

    # Deleting the source (every row of it) leaves the fork working, as on SQLite.
    for table in ("checkpoints", "runs", "agents"):
        psql(url, f"DELETE FROM {schema}.{table} WHERE agent_id = '{safe_id(sid)}'")
    assert pg_rows(url, schema, fid)[0], "the fork's own rows are still there"
    mark = len(s.backend.records())
    assert send(s, fid, "sixth question on the fork")["status"] == "finished"
    assert len(turns_sent(s, mark)[0]) == 2


def safe_id(sid: str) -> str:
    """A session id as the daemon makes them, checked before it is put in a statement."""
    import re
    assert re.fullmatch(r"[A-Za-z0-9_.:-]+", sid), sid
    return sid


def psql(url: str, sql: str) -> list[str]:
    """The rows of `sql` as psql's unaligned text, one line each (bytea in hex)."""
    import shutil
    import subprocess
    exe = shutil.which("psql") or next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin/psql"), reverse=True)))
    out = subprocess.run([str(exe), url, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql],
                         capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def pg_rows(url: str, schema: str, sid: str) -> list:
    """Every stored row of session `sid` in the PostgreSQL schema, as `sqlite_rows` reads the
    SQLite file: its agent document, runs, checkpoint blobs, run events, kept inputs and event
    metadata, each row as its whole text (`t::text`)."""
    sid = safe_id(sid)
    runs = f"(SELECT run_id FROM {schema}.runs WHERE agent_id = '{sid}')"
    out = []
    for q in (f"SELECT t::text FROM {schema}.agents t WHERE agent_id = '{sid}'",
              f"SELECT t::text FROM {schema}.runs t WHERE agent_id = '{sid}' ORDER BY run_id",
              f"SELECT t::text FROM {schema}.checkpoints t WHERE agent_id = '{sid}' ORDER BY blob_id",
              f"SELECT t::text FROM {schema}.run_events t WHERE run_id IN {runs} ORDER BY run_id, seq",
              f"SELECT t::text FROM {schema}.run_inputs t WHERE run_id IN {runs} ORDER BY run_id",
              f"SELECT t::text FROM {schema}.event_meta t WHERE run_id IN {runs} ORDER BY run_id, seq"):
        rows = psql(url, q)
        assert rows or "event_meta" in q, q
        out.append(rows)
    return out


def settled(s, sid: str, rows) -> list:
    """The session's rows once the bridge has written its last run's final documents (just
    after the stream ends): its runs all finished and two reads 0.2 s apart alike."""
    deadline = time.monotonic() + 10
    last = None
    while time.monotonic() < deadline:
        _, listed = s.api.call("GET", f"/v1/sessions/{sid}/runs")
        if all(r["status"] == "finished" for r in listed["runs"]):
            now = rows(sid)
            if now == last:
                return now
            last = now
        time.sleep(0.2)
    raise AssertionError(f"session {sid}'s rows did not settle")


def fork_after_turn_one(s, rows=None) -> tuple[str, str]:
    """Three turns, a fork after turn 1, a message on the fork and one on the source. With
    `rows` (a session id -> its stored rows), the source's rows are checked byte-identical
    across the fork and the fork's own turn."""
    sid = s.session()
    runs, marks = [], []
    for p in PROMPTS:
        marks.append(len(s.backend.records()))
        runs.append(send(s, sid, p)["run_id"])
    after_turn_1 = turns_sent(s, marks[1])[0]
    assert len(after_turn_1) == 1
    before = settled(s, sid, rows) if rows else None
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
    if rows:
        assert settled(s, fid, rows) and rows(sid) == before, "the fork changed its source's rows"
    status, runs_of_fork = s.api.call("GET", f"/v1/sessions/{fid}/runs")
    # The bridge numbers a fork's turns from its own runs.
    assert [r["turn_number"] for r in runs_of_fork["runs"]] == [1], runs_of_fork

    # The source still carries its three turns.
    mark = len(s.backend.records())
    send(s, sid, "fifth question on the source")
    assert len(turns_sent(s, mark)[0]) == 3
    status, runs_of_source = s.api.call("GET", f"/v1/sessions/{sid}/runs")
    assert [r["turn_number"] for r in runs_of_source["runs"]] == [1, 2, 3, 4]

    # Retry of turn 2 without a text: its own prompt again (the input kept when it was
    # sent), from the state after turn 1, in a new session.
    mark = len(s.backend.records())
    c, r = s.api.open("POST", f"/v1/runs/{runs[1]}/retry", {})
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


def test_a_fork_without_runs_keeps_its_sources_model_and_tools_across_a_restart(setup_env, tmp_path):
    """A fork has no runs of its own, so no run says its model: after a daemon restart its
    first message must still go out with the source's model (kept with the fork), not the
    bridge's default."""
    model = "fork-model-kept"
    s = ApiStack(setup_env, tmp_path, scenario="text", backend_env={"FB_EXTRA_MODELS": model})
    status, body = s.api.call("POST", "/v1/sessions", {"model": model})
    assert status == 201, body
    sid = body["session"]["session_id"]
    mark = len(s.backend.records())
    run = send(s, sid, PROMPTS[0])["run_id"]
    assert model in requests_text(s, mark), "the source's own turn uses its model"
    # At once: the bridge writes the run's final document just after its stream ends, and the
    # fork waits for it.
    status, forked = s.api.call("POST", f"/v1/sessions/{sid}/fork", {"run_id": run, "at": "after"})
    assert status == 201, forked
    fid = forked["session"]["session_id"]
    assert forked["session"]["model"] == model

    s.stop()
    s.start()
    status, got = s.api.call("GET", f"/v1/sessions/{fid}")
    assert status == 200 and got["model"] == model, got
    mark = len(s.backend.records())
    assert send(s, fid, "a question on the fork after a restart")["status"] == "finished"
    sent = requests_text(s, mark)
    assert model in sent, "the fork's first run after a restart went out with another model"
    assert "composer-2" not in sent


def test_the_console_forks_from_a_run_and_retries_it(setup_env, browser_env, tmp_path):
    """Issue 22's browser test: on a finished run's page, "Fork from here" makes a fork whose
    page says where it came from, the run then lists it, and "Retry" sends the run's own
    message again in a new session, whose run the console follows to its end."""
    from test_console_e2e import Browser
    s = ApiStack(setup_env, tmp_path, scenario="text")
    sid = s.session()
    run = send(s, sid, PROMPTS[0])["run_id"]
    console = s.run.daemon_ready["console_url"]
    b = Browser(browser_env, tmp_path)
    try:
        b("goto", url=console + "#token=" + s.api.token)
        b("wait", selector="h1")
        b("goto", url=console + f"#/runs/{run}")
        b("wait", selector="#fork-after")
        b("click", selector="#fork-after")
        b("wait", selector=".forked-from")
        fid = b("eval", js="() => decodeURIComponent(location.hash.split('/')[2])")
        assert fid not in (sid, run)
        status, fork = s.api.call("GET", f"/v1/sessions/{fid}")
        assert status == 200 and fork["forked_from"] == {"session_id": sid, "run_id": run, "at": "after"}, fork
        # The fork's page links back to the source session and run.
        links = b("eval", js="() => [...document.querySelectorAll('.forked-from a')].map(a => a.getAttribute('href'))")
        assert links == [f"#/sessions/{sid}", f"#/runs/{run}"], links
        # The source's run lists its fork.
        b("click", selector=".forked-from a[href^='#/runs/']")
        b("wait", selector=f".run-forks li[data-session='{fid}']")

        mark = len(s.backend.records())
        b("click", selector="#retry")
        deadline = time.monotonic() + 30
        while b("eval", js="() => location.hash") == f"#/runs/{run}" and time.monotonic() < deadline:
            time.sleep(0.05)
        b("wait", selector="section.run[data-status='finished']", timeout_ms=60000)
        retried_run = b("eval", js="() => document.querySelector('section.run').dataset.runId")
        assert retried_run and retried_run != run
        status, got = s.api.call("GET", f"/v1/runs/{retried_run}")
        rid = got["session_id"]
        status, retried = s.api.call("GET", f"/v1/sessions/{rid}")
        assert retried["forked_from"] == {"session_id": sid, "run_id": run, "at": "before"}, retried
        assert PROMPTS[0] in requests_text(s, mark), "the retry did not resend the run's own message"
        status, forks = s.api.call("GET", f"/v1/runs/{run}/forks")
        assert [f["session_id"] for f in forks["forks"]] == [fid, rid], forks
        # The retry is told apart from the fork, in the API and on the run's page (issue 38).
        assert [f["retry"] for f in forks["forks"]] == [False, True], forks
        b("goto", url=console + f"#/runs/{run}")
        b("wait", selector=f".run-forks li[data-session='{rid}']")
        words = b("eval", js=f"() => [...document.querySelectorAll('.run-forks li')].map(li => li.textContent)")
        assert "a fork that continues" in words[0] and words[1].split(" · ")[0].endswith(
            "a retry: this run's message asked again from where this run started"), words
    finally:
        b.close()
        s.stop()
