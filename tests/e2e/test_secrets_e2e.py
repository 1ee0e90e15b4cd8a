"""Issue 24: no secret in any log line. A full session through `callbackd run -- <real bridge>`
with debug logging (a session, a tool turn, a follow, a denied request, a restart-free stop),
then every token in play is searched for in everything callbackd wrote to stderr, which is
what journald or a container runtime keeps: the store and tool tokens, the API token and the
read token, and the bridge's own auth token."""
from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import harness as h
from test_run_api_e2e import Api, ApiStack, read_all, types

READ_TOKEN = "read-token-" + h.rand_token()


def test_no_configured_token_appears_in_the_logs_of_a_full_session(setup_env, tmp_path, monkeypatch):
    monkeypatch.setenv("CALLBACKD_API_READ_TOKEN", READ_TOKEN)
    s = ApiStack(setup_env, tmp_path, config='[log]\nlevel = "debug"\n')
    run = s.run
    tokens = tomllib.loads((s.db.parent / "callbackd.tokens").read_text())
    bridge_token = Path(run.ready["authTokenFile"]).read_text().strip()
    argv = [x.decode() for x in Path(f"/proc/{run.bridge_pid}/cmdline").read_bytes().split(b"\0")]
    store_token = argv[argv.index("--store-callback-auth-token") + 1]
    tool_token = argv[argv.index("--tool-callback-auth-token") + 1]

    # A session and a tool turn through the run API, as a user drives it.
    sid = s.session()
    c, r = s.api.open("POST", f"/v1/sessions/{sid}/messages", {"text": "please call the echo tool"})
    live = read_all(r)
    c.close()
    assert types(live)[-1] == "completed", types(live)
    # The terminal client, found through the runtime file, and a wrong token refused.
    out = subprocess.run([str(h.callbackd_bin()), "runs", sid, "--db", str(s.db)], cwd="/",
                         env={k: v for k, v in os.environ.items() if not k.startswith("CALLBACKD_")},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("RUN "), out
    status, _ = Api(run.daemon_ready["url"], "not-" + tokens["api_token"]).call("GET", "/v1/sessions")
    assert status == 401
    status, _ = Api(run.daemon_ready["url"], READ_TOKEN).call("GET", "/v1/sessions")
    assert status == 200
    s.stop()

    logs = run.proc.stderr_text()
    assert "callbackd ready " in logs and "DEBUG" in logs, logs[-2000:]
    secrets = {"api_token": tokens["api_token"], "api_read_token": READ_TOKEN, "store token": store_token,
               "tool token": tool_token, "bridge auth token": bridge_token}
    for name, secret in secrets.items():
        assert len(secret) >= 16, name
        assert secret not in logs, f"the {name} is in callbackd's stderr"
    # The ready line still says where the console is, and where its token is kept.
    ready = run.daemon_ready
    assert ready["console_url"] == ready["url"] + "ui/", ready
    assert not Path(ready["runtime_file"]).exists(), "removed on a clean stop"
