# From a checkout of this repository, with CURSOR_API_KEY set to your Cursor API key. Stop at
# the first failing step (paste it into `bash`, not your login shell, or save it as a file and
# run `bash quickstart.sh`: a failure then ends that shell, not your terminal).
set -e
: "${CURSOR_API_KEY:?set CURSOR_API_KEY to your Cursor API key first}"

# 1. callbackd: a release build, installed as ~/.cargo/bin/callbackd (rustup puts ~/.cargo/bin
#    on PATH; if `callbackd --version` is not found, run: export PATH="$HOME/.cargo/bin:$PATH").
cargo install --locked --path .
callbackd --version

# 2. The bridge: it ships inside the cursor-sdk wheel, with its own node. A venv of its own
#    (Debian's and Ubuntu's python3 refuse a system-wide pip install).
python3 -m venv ~/.venvs/cursor-sdk
~/.venvs/cursor-sdk/bin/pip install --quiet cursor-sdk==1.1.0
BRIDGE_DIR="$(~/.venvs/cursor-sdk/bin/python -c 'import cursor_sdk, os; print(os.path.join(os.path.dirname(cursor_sdk.__file__), "_vendor", "bridge"))')"

# 3. Start both, from the folder the agent is to work in. callbackd keeps its database and tokens
#    in ~/.local/share/callbackd (or $XDG_DATA_HOME/callbackd), never in that folder. Run it in a
#    second terminal without the `&` if you like; the loop waits until the bridge is ready.
mkdir -p ~/agent-workspace && cd ~/agent-workspace
callbackd run --listen 127.0.0.1:7420 --ready-file bridge-ready.json -- \
  "$BRIDGE_DIR/bin/node" "$BRIDGE_DIR/dist/bin/cursor-sdk-bridge.js" --workspace "$PWD" &
CALLBACKD_PID=$!
until [ -s bridge-ready.json ] || ! kill -0 "$CALLBACKD_PID" 2>/dev/null; do sleep 0.5; done

# 4. See a turn through the run API: a session, then a message whose answer is the run's
#    events as they happen (Server-Sent Events), from run_started to completed.
API=http://127.0.0.1:7420/v1
TOKEN=$(sed -n 's/^api_token = "\(.*\)"$/\1/p' "${XDG_DATA_HOME:-$HOME/.local/share}/callbackd/callbackd.tokens")
SESSION=$(curl -sf -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d '{}' \
  "$API/sessions" | python3 -c 'import json, sys; print(json.load(sys.stdin)["session"]["session_id"])')
curl -sfN -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
  -d '{"text": "Say hello"}' "$API/sessions/$SESSION/messages"

# 5. Stop: SIGTERM to callbackd cancels held calls, stops the bridge, then callbackd itself
#    (exit status 0); runs a crash leaves are ended at the next start (docs/bridge.md).
kill "$CALLBACKD_PID" && wait "$CALLBACKD_PID"
