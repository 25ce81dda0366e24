#!/bin/sh
# Builds plugin.wasm next to this script (run from anywhere, e.g. by
# `make examples` from the repo root).
set -eu
cd "$(dirname "$0")"
GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o plugin.wasm .
