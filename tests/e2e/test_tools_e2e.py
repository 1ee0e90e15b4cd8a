"""Issue 3, end to end: a real bridge turn in which the model calls a callbackd tool that was
declared from `callbackd tools export`, and the run finishes with the tool's result in the
conversation.
"""
from __future__ import annotations

import json
import os
import subprocess

import harness as h

FINISHED = "RUN_LIFECYCLE_STATUS_FINISHED"
ECHO_ARGS = {"text": "ping ✓", "nested": {"list": [1, 2.5, "drei", None, True, {"ключ": "値"}]}, "n": 42}


def tools_export(workdir) -> dict:
    """`callbackd tools export`: the JSON an adapter puts in CreateAgent options.local.customTools."""
    res = subprocess.run([str(h.callbackd_bin()), "tools", "export"], cwd=workdir, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, timeout=30, start_new_session=True,
                         env={**os.environ, "CALLBACKD_STORE_TOKEN": h.rand_token(), "CALLBACKD_TOOL_TOKEN": h.rand_token()})
    assert res.returncode == 0, f"callbackd tools export failed ({res.returncode}): {res.stderr.decode()[-2000:]}"
    return json.loads(res.stdout)


def test_tool_turn_with_exported_echo_tool(make_stack, tmp_path):
    decls = tools_export(tmp_path)
    assert "echo" in decls, f"echo is not among the exported tools: {sorted(decls)}"
    echo = decls["echo"]
    assert isinstance(echo.get("inputSchema"), dict), echo

    st = make_stack("tool", backend_env={"FB_TOOL_NAME": "echo", "FB_TOOL_ARGS": json.dumps(ECHO_ARGS)})
    c = st.client
    agent = c.create_agent(st.ws1, name="echo user", custom_tools=decls)
    _, res = c.send(agent, "Say hello, then call the echo tool.")
    assert res["status"] == FINISHED, res

    # what the bridge sent back to the model for the tool call
    results = st.backend.mcp_results()
    assert len(results) == 1, results
    assert "success" in results[0], f"the echo tool call failed: {results[0]}"
    success = results[0]["success"]
    assert success.get("structuredContent") == ECHO_ARGS, success
    assert json.loads(success["content"][0]["text"]["text"]) == ECHO_ARGS, success

    # ...and the run's conversation carries it (GetRun first: see test_store_e2e.check_observe_replay)
    assert json.loads(res["result"]["result"].removeprefix("The tool returned: ")) == ECHO_ARGS, res
    c.call("GetRun", {"runId": res["runId"]})
    conv = json.loads(c.call("GetRunConversation", {"runId": res["runId"]})["conversationJson"])
    steps = [s for turn in conv for s in turn["turn"]["steps"]]
    calls = [s["message"] for s in steps if s["type"] == "toolCall"]
    assert len(calls) == 1 and calls[0]["args"]["toolName"] == "echo", steps
    assert calls[0]["args"]["args"] == ECHO_ARGS
    result = calls[0]["result"]
    assert result["status"] == "success" and result["value"]["isError"] is False, result
    assert json.loads(result["value"]["content"][0]["text"]["text"]) == ECHO_ARGS, result
