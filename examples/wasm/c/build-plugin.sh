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
# -O3 with the Wasm features wazero runs (docs/abi.md "Wasm features"):
# bulk memory turns memcpy/memset into memory.copy/fill, SIMD lets LLVM
# vectorize; 12% less CPU per record than -O2 alone for the orders
# downgrade (docs/benchmarks.md). Compiled and linked in two
# steps: a link with -O runs binaryen's wasm-opt when it is on PATH,
# without these features, which then refuses the module.
features="-msimd128 -mbulk-memory -msign-ext -mnontrapping-fptoint -ftls-model=local-exec"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
objs=
i=0
for src in "$sdk/streamd.c" "$@"; do
	i=$((i + 1))
	# shellcheck disable=SC2086 # sysroot_flag and features are lists
	"$cc" --target=wasm32-wasi $sysroot_flag -O3 $features -std=c11 -Wall -Wextra -Werror \
		-I"$sdk" -c "$src" -o "$tmp/$i.o"
	objs="$objs $tmp/$i.o"
done
# shellcheck disable=SC2086
"$cc" --target=wasm32-wasi -mexec-model=reactor $sysroot_flag $objs -Wl,--strip-all -o "$out"
echo "built $out ($(wc -c <"$out") bytes)"
