"""Issue 20: Schemathesis (pinned in setup.sh) against a live `callbackd serve`, from the run
API's own OpenAPI document: every operation, schema-valid and invalid inputs (its coverage and
fuzzing phases), every check. Zero server errors and zero answers the document does not
describe (status, content type, headers, body schema).

Two runs, because the daemon has no bridge here: the operations that need one (create a
session, send a message, cancel, retry) answer `501 not_implemented` by design (run-api.md §1), so
their run leaves out the server-error check, and the HAR of their exchanges is searched for
any 5xx other than 501 instead. `positive_data_acceptance` is left out of both: a list cursor
is a string the document cannot tell valid from forged, and a forged one is a 400.

Issue 35 asks for both on real data as well: random ids only ever find nothing (404), so the
streams, a run's state and events, a tool call and an approval are checked with a stored run
pinned first (a turn through the real bridge whose tool call a person approved: its session,
run, tool call and approval ids in every path parameter that names one), then with random ids.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import harness as h
from test_run_api_e2e import ApiStack, frames

BRIDGE_OPS = ["createSession", "sendMessage", "cancelRun", "retryRun", "runAgUi"]


def schemathesis(daemon_url: str, token: str, args: list[str], tmp: Path, name: str,
                 config: Path | None = None) -> tuple[int, str]:
    st = Path(sys.executable).parent / "schemathesis"
    assert st.exists(), f"{st} missing: run tests/e2e/setup.sh"
    base = daemon_url.rstrip("/")
    cmd = [str(st), *(["--config-file", str(config)] if config else []),
           "run", f"{base}/v1/openapi.json", "--url", base,
           "-H", f"Authorization: Bearer {token}", "--checks", "all",
           "--max-examples", "25", "-w", "1", "--phases", "examples,coverage,fuzzing",
           "--seed", "20", "--report", "har", "--report-har-path", str(tmp / f"{name}.har"), *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp)
    return out.returncode, out.stdout + out.stderr


def both_runs(daemon_url: str, token: str, tmp: Path, name: str, config: Path | None = None,
              keep: list[str] = ()) -> list[dict]:
    """The reads with every check, then the bridge's operations (501 without a bridge) with
    no 5xx but 501 in their HAR; the HAR entries of the reads. `keep`: operations left out."""
    skip = [a for op in [*BRIDGE_OPS, *keep] for a in ("--exclude-operation-id", op)]
    code, out = schemathesis(daemon_url, token, ["--exclude-checks", "positive_data_acceptance", *skip],
                             tmp, f"{name}-reads", config)
    assert code == 0, out
    # Every operation schemathesis loaded ran, but the bridge's (none silently left out).
    m = re.search(r"Selected: (\d+)/(\d+)", out)
    assert m and int(m.group(1)) == int(m.group(2)) - len(BRIDGE_OPS) - len(keep) >= 13, out
    only = [a for op in BRIDGE_OPS for a in ("--include-operation-id", op)]
    code, out = schemathesis(daemon_url, token,
                             ["--exclude-checks", "positive_data_acceptance,not_a_server_error", *only],
                             tmp, f"{name}-writes", config)
    assert code == 0, out
    har = json.loads((tmp / f"{name}-writes.har").read_text())
    statuses = [e["response"]["status"] for e in har["log"]["entries"]]
    assert statuses, "no exchanges recorded"
    assert [s for s in statuses if s >= 500 and s != 501] == [], sorted(set(statuses))
    assert 501 in statuses and 400 in statuses, sorted(set(statuses))
    return json.loads((tmp / f"{name}-reads.har").read_text())["log"]["entries"]


def test_schemathesis_finds_nothing_against_the_document(tmp_path):
    db = tmp_path / "data" / "callbackd.db"
    db.parent.mkdir(parents=True)
    daemon = h.Callbackd(tmp_path, db).start()
    try:
        token = tomllib.loads((db.parent / "callbackd.tokens").read_text())["api_token"]
        both_runs(daemon.url, token, tmp_path, "random")
    finally:
        daemon.stop()


APPROVED_TOOL = """
[[tools.command]]
name = "deploy"
description = "Deploys to an environment"
argv = ["sh", "-c", "echo '{\\"deployed\\": true}'"]
input_schema = { type = "object", properties = { env = { type = "string" } } }
approval = { pointer = "/env", values = ["prod"] }
"""


def stored_run(env, tmp: Path) -> dict:
    """A finished turn through the real bridge whose `deploy` call a person approved (with
    edited arguments): the ids of its session, run, tool call and approval."""
    s = ApiStack(env, tmp, scenario="tool", config=APPROVED_TOOL,
                 backend_env={"FB_TOOL_NAME": "deploy", "FB_TOOL_ARGS": json.dumps({"env": "prod"}),
                              "FB_ECHO_USER": "1"})
    try:
        sid = s.session()
        c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": "deploy with the tool"})
        card = None
        for kind, _, d, _ in frames(r):
            if kind == "event" and d["type"] == "approval_required":
                card = d["approval"]
                status, _ = s.api.call("POST", f"/v1/approvals/{card['id']}",
                                       {"decision": "approve", "args": {"env": "prod", "note": "edited"}})
                assert status == 200
            if kind == "event" and d["type"] in ("completed", "error"):
                assert d["type"] == "completed" and d["status"] == "finished", d
                break
        c.close()
        assert card, "no approval was asked for"
        return {"session_id": sid, "run_id": card["run_id"], "tool_call_id": card["tool_call_id"],
                "approval_id": card["id"]}
    finally:
        s.stop()


def test_schemathesis_finds_nothing_with_a_stored_run_pinned(setup_env, tmp_path):
    ids = stored_run(setup_env, tmp_path)
    # The same store, served without a bridge, as in the test above.
    db = tmp_path / "data" / "callbackd.db"
    daemon = h.Callbackd(tmp_path, db).start()
    try:
        token = tomllib.loads((db.parent / "callbackd.tokens").read_text())["api_token"]
        config = tmp_path / "schemathesis.toml"
        config.write_text("[parameters]\n" + "".join(f'"path.{k}" = "{v}"\n' for k, v in ids.items()))
        # Deleting the pinned session would leave the other operations nothing to find: the
        # run with random ids below covers it.
        entries = both_runs(daemon.url, token, tmp_path, "pinned", config, keep=["deleteSession"])
        # The pinned ids reached the daemon and found the run: its state, stream, events, tool
        # call and approval were answered 200, not only 404.
        found = {(e["request"]["method"], e["request"]["url"].split("?")[0].split("/v1", 1)[1])
                 for e in entries if e["response"]["status"] == 200}
        run = f"/runs/{ids['run_id']}"
        for want in (run, f"{run}/stream", f"{run}/events", f"{run}/tool_calls/{ids['tool_call_id']}",
                     f"/approvals/{ids['approval_id']}", f"/sessions/{ids['session_id']}",
                     f"/sessions/{ids['session_id']}/runs"):
            assert ("GET", want) in found, (want, sorted(found))
        streams = [e for e in entries if e["request"]["url"].split("?")[0].endswith(f"{run}/stream")
                   and e["response"]["status"] == 200]
        assert any("tool_completed" in (e["response"]["content"].get("text") or "") for e in streams), streams[:1]
        both_runs(daemon.url, token, tmp_path, "unpinned")
    finally:
        daemon.stop()
