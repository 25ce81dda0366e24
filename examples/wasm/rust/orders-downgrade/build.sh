#!/bin/sh
# Builds examples/wasm/rust/orders-downgrade/plugin.wasm with the system rustc (see
# ../build-plugin.sh). Run from anywhere; fails loudly if a tool is missing.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../build-plugin.sh" "$here"
