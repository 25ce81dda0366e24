#!/bin/sh
# Builds plugin.wasm next to this script with Redpanda's Rust SDK, as its
# authors build a transform: cargo build --release --target wasm32-wasip1
# (with Cargo.lock, in the target directory redpanda/rust's build shares).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../cargo-wasm.sh"
(cd "$here" && CARGO_TARGET_DIR=$here/../target "$CARGO" build -q --release --locked --target wasm32-wasip1)
cp "$here/../target/wasm32-wasip1/release/json-to-avro.wasm" "$here/plugin.wasm"
echo "built plugin.wasm ($(wc -c <"$here/plugin.wasm") bytes) with $("$RUSTC" --version)"
