#!/bin/sh
# Builds plugin.wasm with cargo (rust-toolchain.toml and .cargo/config.toml
# say which toolchain and target; README.md says why).
set -eu
cd "$(dirname "$0")"
command -v cargo >/dev/null 2>&1 || { echo "build.sh: cargo not found: install Debian's cargo, rustc and libstd-rust-dev-wasm32 (scripts/install-tools wasm)" >&2; exit 1; }
cargo build --release --offline
cp "target/@RUST_TARGET@/release/@CRATE@.wasm" plugin.wasm
echo "built plugin.wasm ($(wc -c <plugin.wasm) bytes)"
