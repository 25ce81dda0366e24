#!/usr/bin/env bash
# Builds the native identity plugin into ./plugin.
set -euo pipefail
cd "$(dirname "$0")"
go build -o plugin .
