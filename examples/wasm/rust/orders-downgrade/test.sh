#!/bin/sh
# Tests the Rust orders-downgrade plugin: the SDK's and the downgrade's
# native unit tests (plain rustc --test, no cargo, no network), the
# downgrade's tests built for Wasm under wazero, then the Wasm build against
# the conformance fixture with `streamd plugin test`. Run from
# anywhere; exits non-zero on the first failure or when a tool is missing.
#
# STREAMD: a streamd binary to use (default: built from cmd/streamd).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
if [ -z "${RUSTC:-}" ]; then
	if [ -x /usr/bin/rustc ]; then RUSTC=/usr/bin/rustc; else RUSTC=rustc; fi
fi
command -v "$RUSTC" >/dev/null 2>&1 || { echo "$0: $RUSTC not found: install rustc (Debian)" >&2; exit 1; }
export RUSTC
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$RUSTC" --edition 2021 --test "$root/sdk/rust/src/lib.rs" -o "$tmp/sdk_test"
"$tmp/sdk_test" -q
"$RUSTC" --edition 2021 --test "$here/src/downgrade.rs" -o "$tmp/downgrade_test"
"$tmp/downgrade_test" -q
# The downgrade's tests again, built for Wasm with the plugin's features (its
# 16-byte scans are Wasm SIMD there, SSE2 natively) and run under wazero,
# the engine streamd runs plugins with: TestDowngradeTestsUnderWazero in
# conformance/, which CI runs with the other Go tests (a missing tool fails
# here as it does in CI).
command -v go >/dev/null 2>&1 || { echo "$0: go not found (needed to run wazero)" >&2; exit 1; }
(cd "$root" && STREAMD_REQUIRE_ALL=1 go test -count=1 -run '^TestDowngradeTestsUnderWazero$' \
	./examples/wasm/rust/orders-downgrade/conformance)

"$here/build.sh"

streamd=${STREAMD:-}
if [ -z "$streamd" ]; then
	command -v go >/dev/null 2>&1 || { echo "$0: go not found (needed to build streamd)" >&2; exit 1; }
	(cd "$root" && go build -o "$tmp/streamd" ./cmd/streamd)
	streamd=$tmp/streamd
fi
"$streamd" plugin test "$here/plugin.wasm" \
	--input "$root/examples/wasm/testdata/orders-v2.jsonl" \
	--expect "$root/examples/wasm/testdata/orders-v1.expected.jsonl"
