#!/bin/sh
# Tests the C orders-downgrade plugin: the SDK's and the downgrade's native
# unit tests (host C compiler), then the Wasm build against the conformance
# fixture with `streamd plugin test`. Run from anywhere; exits non-zero on the
# first failure or when a tool is missing.
#
# STREAMD: a streamd binary to use (default: built from cmd/streamd).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cc=${HOST_CC:-cc}
command -v "$cc" >/dev/null 2>&1 || { echo "$0: host C compiler $cc not found" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$root/sdk/c/test/run.sh"

san="-fsanitize=address,undefined -fno-sanitize-recover=all"
echo 'int main(void){return 0;}' >"$tmp/probe.c"
"$cc" $san "$tmp/probe.c" -o "$tmp/probe" 2>/dev/null && "$tmp/probe" || san=
for prog in downgrade_test fuzz; do
	# shellcheck disable=SC2086 # san is a list of flags or empty
	"$cc" -std=c11 -O1 -g -Wall -Wextra -Werror $san -I"$root/sdk/c" \
		"$root/sdk/c/streamd.c" "$here/plugin.c" "$here/downgrade.c" "$here/$prog.c" \
		-o "$tmp/$prog"
done
printf 'downgrade: '
"$tmp/downgrade_test"
"$tmp/fuzz" "${FUZZ_SECONDS:-3}"

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
