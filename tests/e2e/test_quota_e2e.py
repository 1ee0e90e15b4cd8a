"""Issue 12, end to end: what a user of the run API sees when a namespace's quota stops the
real bridge. (Quotas themselves, on both backends: tests/api/namespaces.rs.)"""
from __future__ import annotations

import http.client

from test_run_api_e2e import ApiStack, read_all, types


def metrics(s: ApiStack) -> str:
    host, port = s.run.daemon_ready["url"].split("//", 1)[1].rstrip("/").rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=30)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    return text


def test_a_session_over_max_agents_is_429_naming_the_quota_and_the_others_work_on(setup_env, tmp_path):
    s = ApiStack(setup_env, tmp_path, config='[[namespaces]]\nname = "default"\n[namespaces.quotas]\nmax_agents = 1\n')
    sid = s.session()
    status, body = s.api.call("POST", "/v1/sessions", {})
    assert status == 429 and body["code"] == "resource_exhausted", body
    assert "max_agents quota (1)" in body["detail"], body
    assert body["detail"].count("[resource_exhausted]") == 1, body
    status, listed = s.api.call("GET", "/v1/sessions")
    assert [x["session_id"] for x in listed["sessions"]] == [sid]
    # The session within the quota runs its turns as before.
    c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": "please call the echo tool"})
    assert r.status == 200
    assert types(read_all(r))[-1] == "completed"
    c.close()
    assert 'callbackd_quota_refusals_total{namespace="default",quota="max_agents"} 1' in metrics(s)


def test_a_run_over_max_events_per_run_ends_without_its_later_events_and_the_next_run_works(setup_env, tmp_path):
    s = ApiStack(setup_env, tmp_path, config='[[namespaces]]\nname = "default"\n[namespaces.quotas]\nmax_events_per_run = 4\n')
    sid = s.session()
    for turn in range(2):
        c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": "please call the echo tool"})
        assert r.status == 200
        live = read_all(r, limit=60)
        c.close()
        ids = [i for kind, i, _, _ in live if kind == "event" and i is not None]
        # The bridge does not fail a run whose appends are refused: it finishes it without
        # them. The stream has the first four events and ends with the run (no `completed`,
        # which was one of the refused ones); nothing hangs.
        assert ids == [1, 2, 3, 4], (turn, types(live))
        assert "completed" not in types(live)
        status, runs = s.api.call("GET", f"/v1/sessions/{sid}/runs")
        run = runs["runs"][turn]
        assert run["status"] == "finished" and run["last_seq"] == 4, run
    text = metrics(s)
    line = [x for x in text.splitlines()
            if x.startswith('callbackd_quota_refusals_total{namespace="default",quota="max_events_per_run"}')]
    assert line and int(line[0].split()[-1]) >= 2, text
    assert "is at its max_events_per_run quota (4) for run" in s.run.proc.stderr_text()
