#!/usr/bin/env bash
# Installs Arize Phoenix (PyPI arize-phoenix, pinned) into a venv of its own, E2E_DIR/phoenix-venv:
# the OpenTelemetry collector of test_telemetry_e2e.py. Its own venv because its ~850 MB of
# dependencies (FastAPI, SQLAlchemy, numpy, pandas, ...) must not change the versions the other
# tests run with. Called by setup.sh; idempotent (a stamp file names what was installed, and a
# second call only checks it). CALLBACKD_E2E_NO_PHOENIX=1 skips it (the telemetry e2e tests then
# skip and say why).
# Prints the path of the `phoenix` command on stdout; progress goes to stderr.
set -euo pipefail
PHOENIX_VERSION=20.26.1
PY="${PYTHON:-python3}"
E2E="${1:?usage: phoenix_setup.sh E2E_DIR}"
VENV="$E2E/phoenix-venv"
STAMP="$VENV/.callbackd-phoenix-installed"
WANT="arize-phoenix==$PHOENIX_VERSION"
say() { echo "phoenix-setup: $*" >&2; }
die() { echo "phoenix-setup: error: $*" >&2; exit 1; }

if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$WANT" ] || [ ! -x "$VENV/bin/phoenix" ]; then
  if [ ! -x "$VENV/bin/python" ]; then
    say "creating venv $VENV"
    "$PY" -m venv "$VENV" >&2 || die "python -m venv failed"
  fi
  say "pip install $WANT (once; a few minutes)"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$WANT" >&2 \
    || die "pip install $WANT failed"
  [ -x "$VENV/bin/phoenix" ] || die "no phoenix command in $VENV after pip install"
  echo "$WANT" > "$STAMP"
fi
echo "$VENV/bin/phoenix"
