# From a checkout of this repository, with CURSOR_API_KEY set to your Cursor API key.
: "${CURSOR_API_KEY:?set CURSOR_API_KEY to your Cursor API key first}"

# 1. callbackd: a release build, installed as ~/.cargo/bin/callbackd (rustup puts ~/.cargo/bin
#    on PATH; if `callbackd --version` is not found, run: export PATH="$HOME/.cargo/bin:$PATH").
cargo install --locked --path .
callbackd --version
SNIPPETS="$PWD/tests/e2e/snippets"

# 2. The bridge: it ships inside the cursor-sdk wheel, with its own node. A venv of its own
#    (Debian's and Ubuntu's python3 refuse a system-wide pip install).
python3 -m venv ~/.venvs/cursor-sdk
~/.venvs/cursor-sdk/bin/pip install --quiet cursor-sdk==1.1.0
BRIDGE_DIR="$(~/.venvs/cursor-sdk/bin/python -c 'import cursor_sdk, os; print(os.path.join(os.path.dirname(cursor_sdk.__file__), "_vendor", "bridge"))')"

# 3. Start both, from the folder the agent is to work in. callbackd keeps its database and tokens
#    in ~/.local/share/callbackd (or $XDG_DATA_HOME/callbackd), never in that folder. Run it in a
#    second terminal without the `&` if you like; the loop waits until the bridge is ready.
mkdir -p ~/agent-workspace && cd ~/agent-workspace
callbackd run --ready-file bridge-ready.json -- \
  "$BRIDGE_DIR/bin/node" "$BRIDGE_DIR/dist/bin/cursor-sdk-bridge.js" --workspace "$PWD" &
CALLBACKD_PID=$!
until [ -s bridge-ready.json ] || ! kill -0 "$CALLBACKD_PID" 2>/dev/null; do sleep 0.5; done

# 4. See a turn: prints the agent id, "finished" and the model's answer.
# [run API] This step becomes `curl -N` on POST /v1/sessions/{id}/messages once the run API lands.
~/.venvs/cursor-sdk/bin/python "$SNIPPETS/python_sdk_attach.py"

# 5. Stop: SIGTERM to callbackd stops the bridge, then callbackd itself (exit status 0).
kill "$CALLBACKD_PID" && wait "$CALLBACKD_PID"
