#!/bin/sh
# Builds plugin.wasm from plugin.c and the C SDK with clang for wasm32-wasi
# as a WASI reactor, wasm-ld (lld) and the wasi-libc sysroot (Debian:
# clang, lld, wasi-libc, libclang-rt-dev-wasm32; scripts/install-tools wasm).
set -eu
cd "$(dirname "$0")"
sdk="@SDK@/c"
cc=${CC:-clang}
command -v "$cc" >/dev/null 2>&1 || { echo "build.sh: $cc not found: install clang, lld, wasi-libc (Debian)" >&2; exit 1; }
sysroot=
if [ -n "${WASI_SYSROOT:-}" ]; then
	sysroot="--sysroot=$WASI_SYSROOT"
elif [ -d /usr/share/wasi-sysroot ]; then
	sysroot="--sysroot=/usr/share/wasi-sysroot"
fi
# -O3 with the Wasm features streamd runs (SIMD, bulk memory, sign
# extension, non-trapping float-to-int): faster guest code. Compiled, then
# linked without -O: a link with -O runs binaryen's wasm-opt when it is on
# PATH, without these features, which then refuses the module.
features="-msimd128 -mbulk-memory -msign-ext -mnontrapping-fptoint -ftls-model=local-exec"
# shellcheck disable=SC2086 # sysroot and features are lists
"$cc" --target=wasm32-wasi $sysroot -O3 $features -std=c11 -Wall -Wextra -Werror -I"$sdk" -c "$sdk/streamd.c" -o streamd.o
# shellcheck disable=SC2086
"$cc" --target=wasm32-wasi $sysroot -O3 $features -std=c11 -Wall -Wextra -Werror -I"$sdk" -c plugin.c -o plugin.o
# shellcheck disable=SC2086
"$cc" --target=wasm32-wasi -mexec-model=reactor $sysroot streamd.o plugin.o -Wl,--strip-all -o plugin.wasm
rm -f streamd.o plugin.o
echo "built plugin.wasm ($(wc -c <plugin.wasm) bytes)"
