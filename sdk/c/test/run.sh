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
for kind in TRANSFORM CODEC SINK; do
	# shellcheck disable=SC2086 # san is a list of flags or empty
	"$cc" -std=c11 -O1 -g -Wall -Wextra -Werror $san -DTEST_$kind -I"$here/.." \
		"$here/../streamd.c" "$here/streamd_test.c" -o "$tmp/test_$kind"
	printf '%s: ' "$kind"
	"$tmp/test_$kind"
done

# A short fuzz run of the request decoder (FUZZ_SECONDS, default 3).
# shellcheck disable=SC2086
"$cc" -std=c11 -O1 -g -Wall -Wextra -Werror $san -I"$here/.." \
	"$here/../streamd.c" "$here/fuzz.c" -o "$tmp/fuzz"
"$tmp/fuzz" "${FUZZ_SECONDS:-3}"
