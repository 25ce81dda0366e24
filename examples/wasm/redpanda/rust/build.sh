#!/bin/sh
# Builds the example transforms of Redpanda's Rust SDK (the crate
# redpanda-transform-sdk 1.1.0 from crates.io: identity, identity_logging,
# tee, transcoder, validation_filter) unchanged, as their authors do:
# cargo build --release --target wasm32-wasip1, from the crate as published
# and with its Cargo.lock. The .wasm files land next to this script. Nothing
# of the SDK is kept in this repository: cargo downloads it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../cargo-wasm.sh"
src=$(crate_dir redpanda-transform-sdk 1.1.0)
[ -n "$src" ] || { echo "$0: cargo did not fetch redpanda-transform-sdk 1.1.0" >&2; exit 1; }
# A copy to build in: the registry's copy stays untouched.
work=$here/../target/src/redpanda-transform-sdk-1.1.0
rm -rf "$work"
mkdir -p "$work"
cp -R "$src/." "$work/"
(cd "$work" && CARGO_TARGET_DIR=$here/../target "$CARGO" build -q --release --locked --target wasm32-wasip1 --examples)
for e in identity identity_logging tee transcoder validation_filter; do
	cp "$here/../target/wasm32-wasip1/release/examples/$e.wasm" "$here/$e.wasm"
done
echo "built $(cd "$here" && ls ./*.wasm | tr '\n' ' ')with $("$RUSTC" --version)"
