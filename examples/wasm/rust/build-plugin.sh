#!/bin/sh
# build-plugin.sh CRATE_DIR [OUT.wasm] - builds CRATE_DIR/src/lib.rs and the
# Rust SDK (sdk/rust) into OUT.wasm (default CRATE_DIR/plugin.wasm) with plain
# rustc (no cargo, no network): the system rustc with its wasm32-wasi
# standard library (Debian: rustc and libstd-rust-dev-wasm32).
#
# Environment: RUSTC (default /usr/bin/rustc if it exists, else rustc);
# WASM_TARGET (default: wasm32-wasip1 if RUSTC knows it, else wasm32-wasi).
set -eu
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: $0 CRATE_DIR [OUT.wasm]" >&2
	exit 2
fi
crate=$(cd "$1" && pwd)
out=${2:-$crate/plugin.wasm}
here=$(cd "$(dirname "$0")" && pwd)
sdk=$(cd "$here/../../../sdk/rust" && pwd)
if [ -z "${RUSTC:-}" ]; then
	if [ -x /usr/bin/rustc ]; then RUSTC=/usr/bin/rustc; else RUSTC=rustc; fi
fi
command -v "$RUSTC" >/dev/null 2>&1 || {
	echo "$0: $RUSTC not found: install rustc and libstd-rust-dev-wasm32 (Debian)" >&2
	exit 1
}
if [ -z "${WASM_TARGET:-}" ]; then
	if "$RUSTC" --print target-list | grep -qx wasm32-wasip1; then
		WASM_TARGET=wasm32-wasip1
	else
		WASM_TARGET=wasm32-wasi
	fi
fi
sysroot=$("$RUSTC" --print sysroot)
if [ ! -d "$sysroot/lib/rustlib/$WASM_TARGET" ]; then
	echo "$0: $RUSTC has no standard library for $WASM_TARGET ($sysroot/lib/rustlib/$WASM_TARGET): install libstd-rust-dev-wasm32 (Debian) or add the target" >&2
	exit 1
fi
name=$(sed -n 's/^name = "\(.*\)"/\1/p' "$crate/Cargo.toml" | head -1 | tr - _)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$(cd "$here/../../.." && pwd)
# --remap-path-prefix: the output does not depend on where the repo is.
# target-feature: the Wasm features wazero runs (docs/abi.md "Wasm
# features"): memory.copy/fill for copies, SIMD for LLVM's vectorizer
# (docs/benchmarks.md, issue 17).
flags="--edition 2021 --target $WASM_TARGET -C opt-level=3 -C panic=abort -C codegen-units=1 -C target-feature=+bulk-memory,+simd128,+nontrapping-fptoint --remap-path-prefix=$root=."
# shellcheck disable=SC2086 # flags is a list
"$RUSTC" $flags --crate-type rlib --crate-name streamd "$sdk/src/lib.rs" -o "$tmp/libstreamd.rlib"
# shellcheck disable=SC2086
"$RUSTC" $flags -C lto -C strip=symbols --crate-type cdylib --crate-name "$name" \
	--extern streamd="$tmp/libstreamd.rlib" -L "$tmp" "$crate/src/lib.rs" -o "$out"
echo "built $out ($(wc -c <"$out") bytes, $WASM_TARGET)"
