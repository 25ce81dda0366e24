#!/bin/sh
# Tests the C orders-downgrade plugin: the SDK's and the downgrade's native
# unit tests (host C compiler), then the Wasm build against the conformance
# fixture with `streamd plugin test`. Run from anywhere; exits non-zero on the
# first failure or when a tool is missing.
#
# test.sh --native runs only the downgrade's native tests (downgrade_test.c,
# fuzz.c): TestNativeTests in conformance/ runs that, and TestSDKNative
# sdk/c/test/run.sh, in CI; TestFixture there runs the fixture.
#
# STREAMD: a streamd binary to use (default: built from cmd/streamd).
# FUZZ_SECONDS: each fuzz run's length (default 3).
set -eu
native=
if [ "${1:-}" = --native ]; then
	native=1
	shift
fi
[ $# -eq 0 ] || { echo "usage: $0 [--native]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cc=${HOST_CC:-cc}
command -v "$cc" >/dev/null 2>&1 || { echo "$0: host C compiler $cc not found" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

[ -n "$native" ] || "$root/sdk/c/test/run.sh"

san="-fsanitize=address,undefined -fno-sanitize-recover=all"
echo 'int main(void){return 0;}' >"$tmp/probe.c"
"$cc" $san "$tmp/probe.c" -o "$tmp/probe" 2>/dev/null && "$tmp/probe" || {
	echo "$0: no sanitizers: $cc cannot build and run with $san" >&2
	san=
}
cflags="-std=c11 -O1 -g -Wall -Wextra -Werror $san -I$root/sdk/c"
# The SDK, the plugin and the downgrade compiled once, linked into each test.
for src in "$root/sdk/c/streamd.c" "$here/plugin.c" "$here/downgrade.c"; do
	# shellcheck disable=SC2086 # cflags is a list of flags
	"$cc" $cflags -c "$src" -o "$tmp/$(basename "$src" .c).o"
done
for prog in downgrade_test fuzz; do
	# shellcheck disable=SC2086
	"$cc" $cflags "$tmp/streamd.o" "$tmp/plugin.o" "$tmp/downgrade.o" "$here/$prog.c" -o "$tmp/$prog"
done
printf 'downgrade: '
"$tmp/downgrade_test"
"$tmp/fuzz" "${FUZZ_SECONDS:-3}"
[ -z "$native" ] || exit 0

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
