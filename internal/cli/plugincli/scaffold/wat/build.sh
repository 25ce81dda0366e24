#!/bin/sh
# Builds plugin.wasm from plugin.wat with wabt's wat2wasm (Debian: wabt;
# scripts/install-tools wasm). --debug-names keeps the function names, so
# that a trap's stack trace names them.
set -eu
cd "$(dirname "$0")"
command -v wat2wasm >/dev/null 2>&1 || { echo "build.sh: wat2wasm not found: install wabt (Debian)" >&2; exit 1; }
wat2wasm --debug-names plugin.wat -o plugin.wasm
echo "built plugin.wasm ($(wc -c <plugin.wasm) bytes)"
