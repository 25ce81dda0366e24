#!/bin/sh
# Builds examples/wasm/c/identity/plugin.wasm with the system clang and
# wasi-libc (Debian: clang lld wasi-libc libclang-rt-14-dev-wasm32).
# Run from anywhere; fails loudly if a tool is missing.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../build-plugin.sh" "$here/plugin.wasm" "$here/identity.c"
