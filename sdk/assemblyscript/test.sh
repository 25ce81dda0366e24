#!/bin/sh
# Runs the SDK's tests: npm ci (the pinned assemblyscript), then node --test
# over test/ (compiles test/plugins and drives them through the harness).
# Run from anywhere; needs Node >= 20 and npm; fails loudly.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null 2>&1 || { echo "$0: node not found (need Node >= 20)" >&2; exit 1; }
command -v npm >/dev/null 2>&1 || { echo "$0: npm not found" >&2; exit 1; }
cd "$here"
npm ci --no-audit --no-fund --loglevel=error
node --test test/
