#!/usr/bin/env bash
# Prepares everything the end-to-end tests need, under one directory that is never committed:
#   E2E_DIR/venv/          Python venv with cursor-sdk==1.1.0 (the real bridge ships inside the
#                          wheel at <site-packages>/cursor_sdk/_vendor/bridge), pytest,
#                          jsonschema (the schema oracle), mypy (checks clients/python), and
#                          clients/python itself, installed editable (httpx comes with cursor-sdk)
#   E2E_DIR/ts/node_modules/  the TypeScript client's dev dependencies (typescript,
#                          openapi-typescript, @types/node: `npm ci` of clients/typescript's lock)
#   E2E_DIR/agui/node_modules/  the official AG-UI client (@ag-ui/client, @ag-ui/core 1.0: `npm ci`
#                          of tests/e2e/agui's lock) that test_ag_ui_e2e.py drives POST /v1/ag-ui with
#   E2E_DIR/phoenix-venv/  Arize Phoenix (pinned), the OTLP collector of the telemetry tests
#                          (tests/e2e/phoenix_setup.sh; CALLBACKD_E2E_NO_PHOENIX=1 skips it)
#   E2E_DIR/fbcache/       what the fake backend needs (FAKEBACKEND_CACHE):
#     sdkcopy/             a copy of the bridge's bundled @cursor/sdk ESM build whose index.js also
#                          exports the webpack module loader, so the fake backend can use the SDK's
#                          own generated protobuf classes. The bridge itself is never modified.
#     node_modules         -> the bridge's node_modules (resolves the copy's imports)
#
# E2E_DIR is ${CALLBACKD_E2E_DIR:-<repo>/target/e2e}.
# Env: PYTHON  interpreter used to create the venv (default python3; must be >= 3.11)
#
# Prints shell assignments on stdout (progress goes to stderr), so callers can do
#   eval "$(tests/e2e/setup.sh)"   # exports CALLBACKD_E2E_DIR, E2E_PYTHON, FAKEBACKEND_CACHE, BRIDGE_DIR, NODE,
#                                  # CALLBACKD_TS_NODE_MODULES, CALLBACKD_AGUI_NODE_MODULES, PHOENIX_BIN
# Idempotent: when everything is in place it only checks and prints (well under a second).
# Adapted from the fake backend's own setup.sh (see fakebackend.mjs); the bridge comes from
# `pip install` here instead of `pip download` + unzip.
set -euo pipefail
SDK_VERSION=1.1.0
PY="${PYTHON:-python3}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
E2E="${CALLBACKD_E2E_DIR:-$REPO/target/e2e}"
say() { echo "e2e-setup: $*" >&2; }
die() { echo "e2e-setup: error: $*" >&2; exit 1; }

mkdir -p "$E2E"
E2E="$(cd "$E2E" && pwd -P)"
VENV="$E2E/venv"
CACHE="$E2E/fbcache"
STAMP="$VENV/.callbackd-e2e-installed"
# jsonschema: the oracle of the differential schema test (tests/schema_oracle), pinned so a
# new release cannot change a verdict under CI.
# schemathesis: tests the run API against its own OpenAPI document (test_openapi_e2e.py),
# pinned for the same reason.
# mypy: the type check of clients/python, pinned for the same reason.
WANT="cursor-sdk==$SDK_VERSION pytest pytest-xdist==3.8.0 jsonschema==4.26.0 schemathesis==4.32.5 mypy==2.4.1 standardwebhooks==1.3.0"

site_packages() {  # the venv's site-packages, without starting python
  local d
  for d in "$VENV"/lib/python3.*/site-packages; do [ -d "$d" ] && { echo "$d"; return 0; }; done
  return 1
}
venv_ready() {
  [ -x "$VENV/bin/python" ] && [ "$(cat "$STAMP" 2>/dev/null || true)" = "$WANT" ] || return 1
  local sp; sp="$(site_packages)" || return 1
  [ -d "$sp/cursor_sdk-$SDK_VERSION.dist-info" ] && [ -f "$sp/cursor_sdk/_vendor/bridge/dist/bin/cursor-sdk-bridge.js" ]
}
cache_ready() {
  [ -x "$NODE" ] && [ -f "$BRIDGE/dist/bin/cursor-sdk-bridge.js" ] \
    && [ "$(cat "$CACHE/sdkcopy/.built-from" 2>/dev/null || true)" = "$BRIDGE" ] \
    && [ "$(readlink "$CACHE/node_modules" 2>/dev/null || true)" = "$BRIDGE/node_modules" ]
}

# Serialise concurrent setups sharing one directory (flock is optional).
lock() { if [ -z "${LOCKED:-}" ] && command -v flock >/dev/null 2>&1; then exec 9>"$E2E/.setup.lock"; flock 9; LOCKED=1; fi; }

# 1. The venv with the wheel (and so the bridge) and pytest.
if ! venv_ready; then
  lock
  if ! venv_ready; then
    "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || die "$PY is older than Python 3.11"
    if [ ! -x "$VENV/bin/python" ]; then
      say "creating venv $VENV"
      "$PY" -m venv "$VENV" >&2 || die "python -m venv failed"
    fi
    say "pip install $WANT"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary=cursor-sdk $WANT >&2 \
      || die "pip install $WANT failed"
    rm -f "$STAMP"; echo "$WANT" > "$STAMP"
    venv_ready || die "cursor-sdk $SDK_VERSION is not in $VENV after pip install"
  fi
fi
SP="$(site_packages)"
BRIDGE="$SP/cursor_sdk/_vendor/bridge"
NODE="$BRIDGE/bin/node"
SDK="$BRIDGE/node_modules/@cursor/sdk"

# 2. Exec bits: some installers drop them for files that are not declared scripts.
for f in "$BRIDGE"/bin/*; do
  [ -x "$f" ] || { say "chmod +x $f"; chmod +x "$f"; }
done

# 3. The fake backend's cache.
if ! cache_ready; then
  lock
  mkdir -p "$CACHE"
  [ -x "$NODE" ] || die "$NODE is missing or not executable"
  [ -f "$BRIDGE/dist/bin/cursor-sdk-bridge.js" ] || die "$BRIDGE/dist/bin/cursor-sdk-bridge.js is missing"
  grep -q "\"version\": *\"$SDK_VERSION\"" "$SDK/package.json" \
    || say "warning: $SDK is not @cursor/sdk $SDK_VERSION; the sdkcopy patch may not apply"
  if [ "$(cat "$CACHE/sdkcopy/.built-from" 2>/dev/null || true)" != "$BRIDGE" ]; then
    say "building $CACHE/sdkcopy"
    TMPS="$CACHE/sdkcopy.tmp.$$"
    rm -rf "$TMPS"; mkdir -p "$TMPS"
    cp -R "$SDK/dist/esm" "$TMPS/esm"
    cp "$SDK/package.json" "$TMPS/package.json"
    ln -sfn "$SDK/node_modules" "$TMPS/node_modules"        # the SDK's private @connectrpc copy
    # The webpack runtime's require function is `X` in the 1.1.0 build: function X(t){var r=Q[t];...}
    grep -q 'function X(t){var r=Q\[t\];' "$TMPS/esm/index.js" \
      || { rm -rf "$TMPS"; die "webpack loader not found in $SDK/dist/esm/index.js (SDK version changed?)"; }
    printf '\nexport const __wreq=X;\n' >> "$TMPS/esm/index.js"
    echo "$BRIDGE" > "$TMPS/.built-from"
    rm -rf "$CACHE/sdkcopy"; mv "$TMPS" "$CACHE/sdkcopy"
  fi
  # Bare imports inside the copy (@bufbuild/protobuf, zod, ...) resolve through this link.
  [ -L "$CACHE/node_modules" ] || [ ! -e "$CACHE/node_modules" ] || die "$CACHE/node_modules is not a symlink"
  rm -f "$CACHE/node_modules"; ln -s "$BRIDGE/node_modules" "$CACHE/node_modules"
  cache_ready || die "cache $CACHE is still incomplete"
fi

# 4. The Python client (clients/python), editable, so the tests import this checkout's code.
CLIENT_PY="$REPO/clients/python"
if ! grep -qs "$CLIENT_PY" "$SP"/__editable__*callbackd_client* "$SP"/*.pth; then
  lock
  say "pip install -e $CLIENT_PY"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -e "$CLIENT_PY" >&2 \
    || die "pip install -e $CLIENT_PY failed"
fi

# 5. The TypeScript client's dev dependencies, from its lock file (npm ci; no install scripts).
CLIENT_TS="$REPO/clients/typescript"
TSDIR="$E2E/ts"
if ! cmp -s "$CLIENT_TS/package-lock.json" "$TSDIR/.installed-lock" || [ ! -f "$TSDIR/node_modules/typescript/package.json" ]; then
  lock
  command -v npm >/dev/null || die "npm is missing (Node.js >= 18 with npm installs the TypeScript client's dev dependencies)"
  say "npm ci (typescript, openapi-typescript) in $TSDIR"
  mkdir -p "$TSDIR"
  cp "$CLIENT_TS/package.json" "$CLIENT_TS/package-lock.json" "$TSDIR/"
  (cd "$TSDIR" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2) || die "npm ci in $TSDIR failed"
  cp "$CLIENT_TS/package-lock.json" "$TSDIR/.installed-lock"
fi

# 5b. The official AG-UI client, from its lock file (npm ci; no install scripts).
AGUI_PKG="$REPO/tests/e2e/agui"
AGUIDIR="$E2E/agui"
if ! cmp -s "$AGUI_PKG/package-lock.json" "$AGUIDIR/.installed-lock" || [ ! -f "$AGUIDIR/node_modules/@ag-ui/client/package.json" ]; then
  lock
  command -v npm >/dev/null || die "npm is missing (Node.js >= 18 with npm installs the AG-UI client)"
  say "npm ci (@ag-ui/client, @ag-ui/core) in $AGUIDIR"
  mkdir -p "$AGUIDIR"
  cp "$AGUI_PKG/package.json" "$AGUI_PKG/package-lock.json" "$AGUIDIR/"
  (cd "$AGUIDIR" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2) || die "npm ci in $AGUIDIR failed"
  cp "$AGUI_PKG/package-lock.json" "$AGUIDIR/.installed-lock"
fi

# 6. Arize Phoenix in a venv of its own: the OTLP collector of test_telemetry_e2e.py.
PHOENIX_BIN=""
if [ -z "${CALLBACKD_E2E_NO_PHOENIX:-}" ]; then
  lock
  PHOENIX_BIN="$(PYTHON="$PY" bash "$REPO/tests/e2e/phoenix_setup.sh" "$E2E")" || die "installing Arize Phoenix failed"
fi

say "ready (bridge $BRIDGE)"
printf 'export CALLBACKD_E2E_DIR=%q\nexport E2E_PYTHON=%q\nexport FAKEBACKEND_CACHE=%q\nexport BRIDGE_DIR=%q\nexport NODE=%q\nexport CALLBACKD_TS_NODE_MODULES=%q\nexport CALLBACKD_AGUI_NODE_MODULES=%q\nexport PHOENIX_BIN=%q\n' \
  "$E2E" "$VENV/bin/python" "$CACHE" "$BRIDGE" "$NODE" "$TSDIR/node_modules" "$AGUIDIR/node_modules" "$PHOENIX_BIN"
