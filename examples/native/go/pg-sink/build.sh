#!/usr/bin/env bash
# Builds the native PostgreSQL sink plugin into ./plugin.
set -euo pipefail
cd "$(dirname "$0")"
go build -o plugin .
