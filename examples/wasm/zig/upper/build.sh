#!/bin/sh
# Builds examples/wasm/zig/upper/plugin.wasm from upper.zig with Zig (`zig`
# on PATH, else the PyPI package ziglang: python3 -m ziglang; scripts/
# install-tools zig installs the version this is tested with, 0.17.0).
# docs/plugins.md, "A language without an SDK", says why each flag is there.
set -eu
cd "$(dirname "$0")"
if command -v zig >/dev/null 2>&1; then
	set -- zig
elif python3 -c 'import ziglang' >/dev/null 2>&1; then
	set -- python3 -m ziglang
else
	echo "$0: no Zig: run: python3 -m pip install ziglang==0.17.0 (scripts/install-tools zig)" >&2
	exit 1
fi
# build-exe: a module with its memory and exports; -fno-entry: no _start
# (streamd calls the exports); -rdynamic: export every `export fn` (without
# it the linker keeps none, and streamd says the module has no
# streamd_abi_vN export); --stack 65536: 64 KiB of stack, in a module of 2
# pages (Zig's default stack for wasm32-wasi is 16 MiB, over the 256 pages
# = 16 MiB a plugin may start with); wasm32-freestanding: no WASI imports,
# the plugin needs none; ReleaseSmall: optimized, no safety checks.
"$@" build-exe upper.zig -target wasm32-freestanding -fno-entry -rdynamic --stack 65536 \
	-O ReleaseSmall -femit-bin=plugin.wasm --cache-dir .zig-cache --global-cache-dir .zig-cache
echo "built $(pwd)/plugin.wasm ($(wc -c <plugin.wasm) bytes, Zig $("$@" version))"
