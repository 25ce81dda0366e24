#!/bin/sh
# Builds plugin.wasm from assembly/index.ts: npm install (the AssemblyScript
# compiler from npm, the streamd SDK from where package.json says), then asc with the
# flags the SDK needs (its README says why) and those of the examples'
# build (examples/wasm/assemblyscript/build-plugin.sh): -O3 and 128-bit
# SIMD, which streamd enables and wazero compiles to SSE; then the SDK's
# check of the module's imports and exports.
set -eu
cd "$(dirname "$0")"
command -v node >/dev/null 2>&1 || { echo "build.sh: node not found (need Node >= 20)" >&2; exit 1; }
command -v npm >/dev/null 2>&1 || { echo "build.sh: npm not found" >&2; exit 1; }
[ -d node_modules/assemblyscript ] || npm install --no-audit --no-fund --loglevel=error
npx --no-install asc assembly/index.ts --outFile plugin.wasm -O3 --enable simd \
	--runtime incremental --exportStart _initialize \
	--use abort=~lib/@streamd/sdk/assembly/index/streamdAbort
node node_modules/@streamd/sdk/bin/check.mjs plugin.wasm
echo "built plugin.wasm ($(wc -c <plugin.wasm) bytes)"
