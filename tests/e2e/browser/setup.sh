#!/usr/bin/env bash
# What the console's browser test needs (tests/e2e/test_console_e2e.py), idempotently:
#   - Debian's chromium (/usr/bin/chromium), installed with apt-get when missing (needs root,
#     as on CI); playwright-core drives it and never downloads a browser of its own;
#   - playwright-core from npm, at the version of package-lock.json here, in
#     ${CONSOLE_BROWSER_DIR:-<repo>/target/e2e-browser}/node_modules.
# Prints `export CONSOLE_BROWSER_DIR=... CHROMIUM=...` on stdout; progress goes to stderr.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
REPO="$(cd "$HERE/../../.." && pwd -P)"
DIR="${CONSOLE_BROWSER_DIR:-$REPO/target/e2e-browser}"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
say() { echo "browser-setup: $*" >&2; }
die() { echo "browser-setup: error: $*" >&2; exit 1; }

if [ ! -x "$CHROMIUM" ]; then
  command -v apt-get >/dev/null || die "$CHROMIUM is missing and there is no apt-get to install Debian's chromium"
  [ "$(id -u)" = 0 ] || die "$CHROMIUM is missing; install Debian's chromium (apt-get install chromium) as root"
  say "apt-get install chromium"
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >&2
  [ -x "$CHROMIUM" ] || die "apt-get installed chromium, but $CHROMIUM is not there"
fi

mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd -P)"
STAMP="$DIR/.installed-lock"
if ! cmp -s "$HERE/package-lock.json" "$STAMP" || [ ! -f "$DIR/node_modules/playwright-core/package.json" ]; then
  command -v npm >/dev/null || die "npm is missing (Node.js 20 with npm is needed to install playwright-core)"
  say "npm ci (playwright-core) in $DIR"
  cp "$HERE/package.json" "$HERE/package-lock.json" "$DIR/"
  # No browser download: playwright-core has no install script, and Chromium is Debian's.
  (cd "$DIR" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2)
  cp "$HERE/package-lock.json" "$STAMP"
fi
printf 'export CONSOLE_BROWSER_DIR=%q\nexport CHROMIUM=%q\n' "$DIR" "$CHROMIUM"
