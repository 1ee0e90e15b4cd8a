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


WORD_COUNT = """
[[tools.command]]
name = "word_count"
description = "Counts the words of a text"
input_schema = { type = "object", properties = { text = { type = "string" } }, required = ["text"] }
argv = [PYTHON, "-c", "import json, sys; a = json.load(sys.stdin); print(json.dumps({'words': len(a['text'].split())}))"]
timeout_ms = 20000
"""


def test_one_turn_calls_a_builtin_plugin_tool_and_a_toml_command_tool(setup_env, tmp_path):
    """Issue 4's tool turn: the model calls a Rust plugin tool (the built-in `memory`) and a
    `[[tools.command]]` tool in one turn; both results reach the model and the run finishes."""
    import sys

    config = tmp_path / "callbackd.toml"
    config.write_text(WORD_COUNT.replace("PYTHON", json.dumps(sys.executable)))
    res = subprocess.run([str(h.callbackd_bin()), "tools", "export", "--config", str(config)], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30,
                         env={**os.environ, "CALLBACKD_STORE_TOKEN": h.rand_token(), "CALLBACKD_TOOL_TOKEN": h.rand_token()})
    assert res.returncode == 0, res.stderr.decode()
    decls = json.loads(res.stdout)
    assert {"memory", "word_count"} <= set(decls), sorted(decls)

    backend = h.FakeBackend(setup_env, tmp_path, "auto")
    daemon = h.Callbackd(tmp_path, tmp_path / "data" / "callbackd.db", extra_args=["--config", str(config)]).start()
    bridge = h.Bridge(setup_env, tmp_path, tmp_path / "ws", backend, daemon)
    c = bridge.client
    agent = c.create_agent(tmp_path / "ws", name="two tools", custom_tools=decls)
    backend.post_script({"steps": [
        {"text": "Noting it down, then counting."},
        {"tool": "memory", "args": {"action": "set", "key": "topic", "value": "word counts"}},
        {"tool": "word_count", "args": {"text": "one two three four"}},
        {"textFromLastTool": "Counted: "},
    ], "usage": {"inputTokens": 9, "outputTokens": 4}})
    _, run = c.send(agent, "Remember the topic and count the words.")
    assert run["status"] == FINISHED, run

    results = backend.mcp_results()
    assert len(results) == 2 and all("success" in r for r in results), results
    assert results[1]["success"]["structuredContent"] == {"words": 4}, results[1]
    assert json.loads(run["result"]["result"].removeprefix("Counted: ")) == {"words": 4}, run
    with daemon.db() as db:
        notes = db.query("SELECT key, value FROM memory_notes WHERE agent_id = ?", (agent,))
        assert [(n["key"], n["value"]) for n in notes] == [("topic", "word counts")]
        assert db.agent_doc(agent)["latestCheckpoint"]["rootBlobId"] in db.blob_ids(agent)
