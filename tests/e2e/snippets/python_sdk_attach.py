# Attach the Python SDK to a bridge started by `callbackd run --ready-file bridge-ready.json -- ...`
# (run from the bridge's workspace; CURSOR_API_KEY as usual). Executed verbatim by
# tests/e2e/test_run_e2e.py::test_python_sdk_attaches_to_callbackd_run.
import json
import os

from cursor_sdk import BridgeEndpoint, Client

ready = json.load(open(os.environ.get("CALLBACKD_READY_FILE", "bridge-ready.json")))
client = Client(BridgeEndpoint.from_discovery(ready))
agent = client.create_agent(model="composer-2", api_key=os.environ["CURSOR_API_KEY"], local={"cwd": os.getcwd()})
result = agent.send("Say hello.").wait()
print(agent.agent_id, result.status, result.result)
client.close()
