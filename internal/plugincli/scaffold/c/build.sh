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
# shellcheck disable=SC2086 # sysroot is empty or one word
"$cc" --target=wasm32-wasi -mexec-model=reactor $sysroot -O2 -std=c11 -Wall -Wextra -Werror \
	-I"$sdk" "$sdk/streamd.c" plugin.c -Wl,--strip-all -o plugin.wasm
echo "built plugin.wasm ($(wc -c <plugin.wasm) bytes)"
