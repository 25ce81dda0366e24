#!/bin/sh
# Builds examples/wasm/cpp/upper/plugin.wasm from upper.cc with clang++ for
# wasm32-wasi, wasi-libc and libc++ (Debian: clang lld wasi-libc
# libc++-dev-wasm32 libclang-rt-dev-wasm32; scripts/install-tools wasm).
# docs/plugins.md, "A language without an SDK", says why each flag is there.
set -eu
cd "$(dirname "$0")"
cxx=${CXX:-clang++}
command -v "$cxx" >/dev/null 2>&1 || { echo "$0: $cxx not found: run: sudo apt-get install clang lld wasi-libc libc++-dev-wasm32 libclang-rt-dev-wasm32 (scripts/install-tools wasm)" >&2; exit 1; }
[ -f /usr/lib/wasm32-wasi/libc++.a ] || [ -n "${WASI_SYSROOT:-}" ] || { echo "$0: no libc++ for wasm32-wasi: run: sudo apt-get install libc++-dev-wasm32 (scripts/install-tools wasm)" >&2; exit 1; }
sysroot=
[ -z "${WASI_SYSROOT:-}" ] || sysroot="--sysroot=$WASI_SYSROOT"
# -mexec-model=reactor: a WASI reactor (_initialize runs the constructors
# of globals once, no _start); -fno-exceptions: Wasm exceptions are not
# enabled in streamd (a failed allocation aborts, a trap); the features
# streamd runs (SIMD, bulk memory, sign extension, non-trapping
# float-to-int); export_name/import_module attributes in the source name the
# exports and the streamd.reply import. Compiled, then linked without -O:
# a link with -O runs binaryen's wasm-opt when it is on PATH, without these
# features, which then refuses the module.
features="-msimd128 -mbulk-memory -msign-ext -mnontrapping-fptoint"
# shellcheck disable=SC2086 # sysroot and features are lists
"$cxx" --target=wasm32-wasi $sysroot -std=c++17 -O2 -fno-exceptions $features -Wall -Wextra -Werror -c upper.cc -o upper.o
# shellcheck disable=SC2086
"$cxx" --target=wasm32-wasi $sysroot -mexec-model=reactor upper.o -o plugin.wasm
rm -f upper.o
echo "built $(pwd)/plugin.wasm ($(wc -c <plugin.wasm) bytes, $("$cxx" --version | head -1))"
