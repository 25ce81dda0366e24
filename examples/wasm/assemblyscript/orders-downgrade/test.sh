#!/bin/sh
# Tests the AssemblyScript orders-downgrade plugin: builds plugin.wasm, runs
# the Node tests (ABI surface, conformance fixture, edge cases) with the
# @streamd/sdk harness, then the conformance fixture through the real host
# with `streamd plugin test`. Run from anywhere; exits non-zero on the first
# failure or when a tool is missing.
#
# STREAMD: a streamd binary to use (default: built from cmd/streamd).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$here/build.sh"
(cd "$here" && node --test test.mjs)

streamd=${STREAMD:-}
if [ -z "$streamd" ]; then
	command -v go >/dev/null 2>&1 || { echo "$0: go not found (needed to build streamd)" >&2; exit 1; }
	(cd "$root" && go build -o "$tmp/streamd" ./cmd/streamd)
	streamd=$tmp/streamd
fi
"$streamd" plugin test "$here/plugin.wasm" \
	--input "$root/examples/wasm/testdata/orders-v2.jsonl" \
	--expect "$root/examples/wasm/testdata/orders-v1.expected.jsonl"
