#!/bin/sh
# Builds the demo's two Wasm downgrades: v3 -> v2 (downgrade-v3, here) and
# v2 -> v1 (the Go orders-downgrade example of examples/wasm/go).
set -eu
cd "$(dirname "$0")"
(cd downgrade-v3 && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o plugin.wasm .)
../wasm/go/orders-downgrade/build.sh
echo "built downgrade-v3/plugin.wasm and ../wasm/go/orders-downgrade/plugin.wasm"
