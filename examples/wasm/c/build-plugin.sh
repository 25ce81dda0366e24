#!/bin/sh
# build-plugin.sh OUT.wasm SOURCE.c... - builds a streamd Wasm plugin from C
# sources and the C SDK (sdk/c) with the system toolchain: clang targeting
# wasm32-wasi as a WASI reactor, wasm-ld (lld) and the wasi-libc sysroot.
#
# Environment: CC (default clang), WASI_SYSROOT (default: clang's own, or
# /usr when the wasi-libc headers live in /usr/include/wasm32-wasi).
set -eu
if [ $# -lt 2 ]; then
	echo "usage: $0 OUT.wasm SOURCE.c..." >&2
	exit 2
fi
out=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
sdk=$(cd "$here/../../../sdk/c" && pwd)
cc=${CC:-clang}
if ! command -v "$cc" >/dev/null 2>&1; then
	echo "$0: $cc not found: install clang, lld, wasi-libc and libclang-rt-14-dev-wasm32 (Debian)" >&2
	exit 1
fi
if ! command -v wasm-ld >/dev/null 2>&1 && ! command -v wasm-ld-14 >/dev/null 2>&1; then
	echo "$0: wasm-ld not found: install lld (Debian)" >&2
	exit 1
fi
sysroot_flag=
if [ -n "${WASI_SYSROOT:-}" ]; then
	sysroot_flag="--sysroot=$WASI_SYSROOT"
elif [ -d /usr/share/wasi-sysroot ]; then
	sysroot_flag="--sysroot=/usr/share/wasi-sysroot"
fi
if ! echo '#include <stdlib.h>' | "$cc" --target=wasm32-wasi $sysroot_flag -x c -fsyntax-only - 2>/dev/null; then
	echo "$0: the wasi-libc sysroot is missing: install wasi-libc (Debian) or set WASI_SYSROOT" >&2
	exit 1
fi
# shellcheck disable=SC2086 # sysroot_flag is empty or one word
"$cc" --target=wasm32-wasi -mexec-model=reactor $sysroot_flag \
	-O2 -std=c11 -Wall -Wextra -Werror \
	-I"$sdk" "$sdk/streamd.c" "$@" \
	-Wl,--strip-all -o "$out"
echo "built $out ($(wc -c <"$out") bytes)"
