#!/bin/sh
# Builds examples/wasm/assemblyscript/orders-downgrade/plugin.wasm (npm ci, then asc).
# Run from anywhere; needs Node >= 20 and npm; fails loudly.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../build-plugin.sh" "$here"
