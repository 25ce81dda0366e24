#!/usr/bin/env bash
# Checks that the Python native orders-downgrade plugin can run: python3 with
# grpcio and grpcio-health-checking (pinned in scripts/install-tools). The
# gRPC stubs in gen/ are committed; scripts/gen-proto regenerates them.
set -euo pipefail
cd "$(dirname "$0")"
chmod +x plugin
"${STREAMD_PYTHON:-python3}" -c 'import grpc, grpc_health.v1.health, sys; sys.path.insert(0, "gen"); import streamd.plugin.v1.plugin_pb2_grpc' \
	|| { echo "orders-downgrade (python): needs grpcio and grpcio-health-checking: pip install grpcio==1.85.1 grpcio-health-checking==1.85.1" >&2; exit 1; }
