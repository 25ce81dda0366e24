#!/bin/sh
# build-plugin.sh DIR: builds DIR/plugin.wasm from DIR/assembly/index.ts with
# the AssemblyScript compiler pinned in DIR/package-lock.json, then checks
# that the module is a streamd ABI v1 plugin importing nothing but
# streamd.reply/streamd.log. Needs Node >= 20 and npm; fails loudly.
#
# Flags: the incremental runtime (TLSF + GC that runs on allocation, so
# plugins that allocate per record do not leak; the host never calls into the
# GC); top-level code (where the plugin registers its function) exported as
# the WASI reactor's _initialize, which the host calls once after
# instantiation (docs/abi.md section 2), so it runs with the memory export
# reachable and under the host's call timeout; aborts routed to the SDK's
# handler (logs through streamd.log, then traps); -O3; 128-bit SIMD, which
# the host enables (docs/abi.md section 3) and wazero compiles to SSE: the
# downgrade scans its strings 16 bytes at a time with it.
set -eu
dir=$(cd "${1:?usage: build-plugin.sh DIR}" && pwd)
command -v node >/dev/null 2>&1 || { echo "build-plugin.sh: node not found (need Node >= 20)" >&2; exit 1; }
command -v npm >/dev/null 2>&1 || { echo "build-plugin.sh: npm not found" >&2; exit 1; }
cd "$dir"
npm ci --no-audit --no-fund --loglevel=error
npx --no-install asc assembly/index.ts \
	--outFile plugin.wasm \
	-O3 \
	--enable simd \
	--runtime incremental \
	--exportStart _initialize \
	--use abort=~lib/@streamd/sdk/assembly/index/streamdAbort
node node_modules/@streamd/sdk/bin/check.mjs plugin.wasm
