#!/bin/sh
# Builds plugin.wasm: Go's own WASI target, as a reactor (c-shared), so that
# the host calls its init once (docs/abi.md section 2).
set -eu
cd "$(dirname "$0")"
command -v go >/dev/null 2>&1 || { echo "build.sh: go not found (need Go 1.24 or later)" >&2; exit 1; }
GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o plugin.wasm .
echo "built plugin.wasm ($(wc -c <plugin.wasm) bytes)"
