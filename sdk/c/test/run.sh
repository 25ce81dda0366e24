#!/bin/sh
# Runs the C SDK's native tests: sdk/c/test/streamd_test.c compiled with the
# host C compiler (CC, default cc) as a transform, a codec and a sink, with
# AddressSanitizer and UBSan when the compiler has them (when it has not, it
# says "no sanitizers:" on stderr: TestSDKNative in examples/wasm/c/orders-downgrade/conformance, which CI
# runs, then fails under STREAMD_REQUIRE_ALL=1).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cc=${CC:-cc}
command -v "$cc" >/dev/null 2>&1 || { echo "$0: $cc not found" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
san="-fsanitize=address,undefined -fno-sanitize-recover=all"
echo 'int main(void){return 0;}' >"$tmp/probe.c"
"$cc" $san "$tmp/probe.c" -o "$tmp/probe" 2>/dev/null && "$tmp/probe" || {
	echo "$0: no sanitizers: $cc cannot build and run with $san" >&2
	san=
}
cflags="-std=c11 -O1 -g -Wall -Wextra -Werror $san -I$here/.."
# The SDK compiled once (it does not look at TEST_*), linked into each test.
# shellcheck disable=SC2086 # cflags is a list of flags
"$cc" $cflags -c "$here/../streamd.c" -o "$tmp/streamd.o"
for kind in TRANSFORM CODEC SINK; do
	# shellcheck disable=SC2086
	"$cc" $cflags -DTEST_$kind "$tmp/streamd.o" "$here/streamd_test.c" -o "$tmp/test_$kind"
	printf '%s: ' "$kind"
	"$tmp/test_$kind"
done

# A short fuzz run of the request decoder (FUZZ_SECONDS, default 3).
# shellcheck disable=SC2086
"$cc" $cflags "$tmp/streamd.o" "$here/fuzz.c" -o "$tmp/fuzz"
"$tmp/fuzz" "${FUZZ_SECONDS:-3}"
