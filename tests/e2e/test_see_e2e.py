"""Issue 21, end to end with the real bridge and the fake backend: see everything an agent did
(quiet logs, the run's input, tool calls in full, sessions that can be named, found and deleted).
"""
from __future__ import annotations

import os
import re
import time

from test_run_api_e2e import ApiStack, durable, read_all, types

# A line of callbackd's own log (tracing's text format: time, level, target); the bridge's
# relayed stderr lines do not start like this.
DAEMON_LINE = re.compile(r"^\S*\d{4}-\d\d-\d\dT\S+\s+(TRACE|DEBUG|INFO|WARN|ERROR)\s")


def daemon_lines(text: str) -> list[str]:
    return [l for l in text.splitlines() if DAEMON_LINE.match(re.sub(r"\x1b\[[0-9;]*m", "", l))]


def test_a_default_level_log_of_a_three_turn_session_is_short(setup_env, tmp_path):
    assert "RUST_LOG" not in os.environ, "the test reads the default level's log"
    s = ApiStack(setup_env, tmp_path)
    sid = s.session()
    start = len(daemon_lines(s.run.proc.stderr_text()))
    for text in ("please call the echo tool", "hello", "please call the echo tool"):
        c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": text})
        assert r.status == 200
        assert types(read_all(r))[-1] == "completed"
        c.close()
    # The same three runs in /metrics, from what the real bridge stored: by status, with their
    # durations, tokens and tool calls. A run is counted when its document ends (the store's
    # RunEnded), which the bridge writes a moment after the `completed` the stream ends on.
    deadline = time.monotonic() + 10
    while True:
        c, r = s.api.open("GET", "/metrics")
        metrics = r.read().decode()
        c.close()
        if 'status="finished"} 3\n' in metrics or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert 'callbackd_runs_total{namespace="default",status="finished"} 3\n' in metrics, metrics
    assert 'callbackd_run_duration_seconds_count{namespace="default"} 3\n' in metrics, metrics
    assert 'callbackd_tool_calls_total{namespace="default",tool="echo",outcome="ok"} 2\n' in metrics, metrics
    assert re.search(r'^callbackd_tokens_total\{namespace="default",kind="input"\} [1-9]', metrics, re.M), metrics
    s.stop()
    lines = daemon_lines(s.run.proc.stderr_text())
    session = lines[start:]
    assert len(lines) <= 15 + start, "\n".join(lines)
    # What is left is what matters: each run's start and end.
    assert sum("run started" in l for l in session) == 3, "\n".join(session)
    assert sum("run ended" in l for l in session) == 3, "\n".join(session)


def test_the_prompt_is_in_the_run_state_its_stream_and_the_runs_list(setup_env, tmp_path):
    s = ApiStack(setup_env, tmp_path)
    sid = s.session()
    prompt = "please call the echo tool " + "x" * 300
    c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": prompt})
    live = read_all(r)
    c.close()
    started = next(d for kind, _, d, _ in live if kind == "event" and d["type"] == "run_started")
    assert started["input"] == {"text": prompt}, started
    run_id = started["run_id"]
    status, state = s.api.call("GET", f"/v1/runs/{run_id}")
    assert status == 200 and state["input"] == {"text": prompt}, state
    # Replayed: the same bytes as live.
    c, r = s.api.open("GET", f"/v1/runs/{run_id}/stream?after=0")
    replay = read_all(r)
    c.close()
    assert durable(replay) == durable(live)
    status, runs = s.api.call("GET", f"/v1/sessions/{sid}/runs")
    listed = next(x for x in runs["runs"] if x["run_id"] == run_id)["input"]
    assert listed == {"text": prompt[:200], "truncated": True}, listed


def test_tool_events_carry_the_arguments_and_the_result(setup_env, tmp_path):
    s = ApiStack(setup_env, tmp_path)
    sid = s.session()
    c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": "please call the echo tool"})
    live = read_all(r)
    c.close()
    events = [d for kind, _, d, _ in live if kind == "event"]
    started = next(d for d in events if d["type"] == "tool_started")
    completed = next(d for d in events if d["type"] == "tool_completed")
    assert started["tool"] == "echo" and isinstance(started["arguments"], dict) and started["arguments"], started
    # The result is the tool's own JSON (echo returns its arguments), not the bridge's
    # {"status": "success", "value": {"content": [...]}} wrapper (issue 35).
    assert completed["outcome"] == "ok" and completed["result"] == started["arguments"], completed
    status, whole = s.api.call("GET", f"/v1/runs/{started['run_id']}/tool_calls/{started['tool_call_id']}")
    assert status == 200, whole
    assert whole["arguments"] == started["arguments"] and whole["result"] == completed["result"], whole


def test_a_session_is_renamed_found_deleted_and_gone_from_the_bridge(setup_env, tmp_path):
    import harness as h

    s = ApiStack(setup_env, tmp_path)
    used, idle = s.session(), s.session()
    c, r = s.api.open("POST", f"/v1/sessions/{used}/messages", {"text": "please call the echo tool"})
    assert types(read_all(r))[-1] == "completed"
    c.close()

    status, body = s.api.call("PATCH", f"/v1/sessions/{used}", {"name": "Q3 deploy plan"})
    assert status == 200 and body["name"] == "Q3 deploy plan", body
    # The SDK spreads the stored document into its own updates: the name survives a turn.
    c, r = s.api.open("POST", f"/v1/sessions/{used}/messages", {"text": "hello"})
    assert types(read_all(r))[-1] == "completed"
    c.close()
    status, found = s.api.call("GET", "/v1/sessions?q=deploy")
    assert status == 200 and [x["session_id"] for x in found["sessions"]] == [used], found
    assert found["sessions"][0]["name"] == "Q3 deploy plan"
    status, runs = s.api.call("GET", "/v1/runs?q=deploy")
    assert status == 200 and len(runs["runs"]) == 2, runs

    # Usage per day adds up to the runs' usage. Both read the run documents, whose usage the
    # bridge writes 10-60 ms after the turn's last event: read both again until the last
    # turn's document has it (a read in between sees one without the other).
    deadline = time.monotonic() + 5
    while True:
        status, usage = s.api.call("GET", "/v1/usage?group_by=day")
        assert status == 200, usage
        status, every = s.api.call("GET", "/v1/runs?limit=1000")
        want = {k: 0 for k in ("input", "output", "cache_read", "cache_write")}
        for run in every["runs"]:
            for k, key in (("input", "inputTokens"), ("output", "outputTokens"),
                           ("cache_read", "cacheReadTokens"), ("cache_write", "cacheWriteTokens")):
                want[k] += (run["usage"] or {}).get(key, 0)
        days = {k: sum(g["tokens"][k] for g in usage["groups"]) for k in want}
        settled = all(run["usage"] for run in every["runs"])
        if (settled and days == want == usage["total"]["tokens"]) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert want["input"] > 0, every
    assert days == want == usage["total"]["tokens"], (usage, want)

    def bridge_lists():
        listed = s.run.client.call("ListAgents", {"options": {"cwd": str(s.ws)}})
        return {a.get("agentId") for a in listed.get("items", [])}

    assert {used, idle} <= bridge_lists()
    # Deleted: gone from the store and from the bridge (its registry too: a Send fails).
    for sid in (used, idle):  # `idle` was never messaged: its queued first run never ran
        status, body = s.api.call("DELETE", f"/v1/sessions/{sid}")
        assert status == 204, body
        status, body = s.api.call("GET", f"/v1/sessions/{sid}")
        assert status == 404, body
        try:
            s.run.client.stream("Send", {"agentId": sid, "message": {"text": "hello"}}, timeout=30)
            raise AssertionError(f"the bridge still sends to deleted session {sid}")
        except h.ConnectError as e:
            assert e.code == "not_found", e
        status, body = s.api.call("POST", f"/v1/sessions/{sid}/messages", {"text": "hello"})
        assert status == 404, body
    status, runs = s.api.call("GET", "/v1/runs")
    assert runs["runs"] == [], runs
    # Nothing of them is left in the store (the bridge's own agent list reads it).
    assert not {used, idle} & bridge_lists()


def test_update_plan_shows_a_plan(setup_env, tmp_path):
    s = ApiStack(setup_env, tmp_path)
    sid = s.session()
    items = [{"title": "Read the invoice", "status": "completed"},
             {"title": "Refund order 42", "status": "in_progress"},
             {"title": "Tell the customer", "status": "pending"}]
    s.backend.post_script({"steps": [{"text": "Planning."}, {"tool": "update_plan", "args": {"items": items}},
                                     {"textFromLastTool": "Plan said: "}]})
    c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": "make a plan"})
    live = read_all(r)
    c.close()
    events = [d for kind, _, d, _ in live if kind == "event"]
    plan = next(d for d in events if d["type"] == "plan")
    assert plan["items"] == items, plan
    done = next(d for d in events if d["type"] == "tool_completed")
    assert done["tool"] == "update_plan" and done["outcome"] == "ok" and done["tool_call_id"] == plan["tool_call_id"], done
    assert events[-1]["type"] == "completed" and events[-1]["output"] == 'Plan said: {"items":3,"updated":true}', events[-1]
    c, r = s.api.open("GET", f"/v1/runs/{plan['run_id']}/stream?after=0")
    replay = read_all(r)
    c.close()
    assert durable(replay) == durable(live)


def test_a_retried_turn_and_a_repeated_tool_call_look_alike_so_neither_is_labelled(setup_env, tmp_path):
    """Issue 21 item 3. The bridge retries a failed turn without telling anyone (run-api.md,
    "Attempts"): its four attempts are stored exactly like a model that calls the same tool
    again in one attempt. callbackd therefore labels neither: every snapshot says attempt 1,
    live and replayed, and the retried turn shows all four attempts' tool calls."""
    s = ApiStack(setup_env, tmp_path, scenario="toolerror")
    say, call = {"text": "Calling the echo tool."}, {"tool": "echo", "args": {"text": "ping"}}
    s.backend.post_script({"steps": [say, call, say, call, {"text": "done"}],
                           "usage": {"inputTokens": 20, "outputTokens": 12}})
    sid = s.session()
    runs = {}
    for name in ("repeated", "retried"):
        c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": "call the echo tool"})
        live = [d for kind, i, d, _ in read_all(r, limit=120) if kind == "event" and i is not None]
        c.close()
        status, page = s.api.call("GET", f"/v1/runs/{live[0]['run_id']}/events?limit=500")
        assert status == 200 and page["events"] == live, (page, live)
        runs[name] = live

    def groups(events):
        """(type, text or tool and arguments) of each event between the RUNNING step and the end."""
        return [(e["type"], e.get("text") or (e.get("tool"), e.get("arguments")))
                for e in events[2:-1] if e["type"] != "usage"]

    repeated, retried = runs["repeated"], runs["retried"]
    assert repeated[-1]["type"] == "completed" and retried[-1]["type"] == "error", (repeated, retried)
    one = groups(retried)[:3]
    assert [t for t, _ in one] == ["message_snapshot", "tool_started", "tool_completed"], one
    assert groups(retried) == one * 4, groups(retried)
    assert groups(repeated)[:6] == one * 2, groups(repeated)
    ids = [e["tool_call_id"] for e in retried if e["type"] == "tool_started"]
    assert len(set(ids)) == 4, ids
    for events in (repeated, retried):
        assert {e["attempt"] for e in events if e["type"] == "message_snapshot"} == {1}, events
