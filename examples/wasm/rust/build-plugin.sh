#!/bin/sh
# build-plugin.sh CRATE_DIR [OUT.wasm] - builds CRATE_DIR/src/lib.rs and the
# Rust SDK (sdk/rust) into OUT.wasm (default CRATE_DIR/plugin.wasm) with plain
# rustc (no cargo, no network): the system rustc with its wasm32-wasi
# standard library (Debian: rustc and libstd-rust-dev-wasm32).
#
# build-plugin.sh --native-bench CRATE_DIR OUT - builds the same crate and
# SDK for the host, with the same optimization flags, into the benchmark
# CRATE_DIR/bench_native.rs (docs/benchmarks.md: the same code
# compiled natively).
#
# build-plugin.sh --wasm-test SOURCE.rs OUT.wasm - builds SOURCE.rs's own
# tests (rustc --test) for Wasm with the plugin's target and features, a
# WASI command to run under wazero (the engine streamd runs plugins with).
#
# Environment: RUSTC (default /usr/bin/rustc if it exists, else rustc);
# WASM_TARGET (default: wasm32-wasip1 if RUSTC knows it, else wasm32-wasi).
set -eu
native=
wasm_test=
if [ "${1:-}" = --native-bench ]; then
	native=1
	shift
	[ $# -eq 2 ] || { echo "usage: $0 --native-bench CRATE_DIR OUT" >&2; exit 2; }
elif [ "${1:-}" = --wasm-test ]; then
	wasm_test=1
	shift
	[ $# -eq 2 ] || { echo "usage: $0 --wasm-test SOURCE.rs OUT.wasm" >&2; exit 2; }
fi
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: $0 CRATE_DIR [OUT.wasm]" >&2
	exit 2
fi
if [ -n "$wasm_test" ]; then
	src=$1
	out=$2
else
	crate=$(cd "$1" && pwd)
	out=${2:-$crate/plugin.wasm}
fi
here=$(cd "$(dirname "$0")" && pwd)
sdk=$(cd "$here/../../../sdk/rust" && pwd)
if [ -z "${RUSTC:-}" ]; then
	if [ -x /usr/bin/rustc ]; then RUSTC=/usr/bin/rustc; else RUSTC=rustc; fi
fi
command -v "$RUSTC" >/dev/null 2>&1 || {
	echo "$0: $RUSTC not found: install rustc and libstd-rust-dev-wasm32 (Debian)" >&2
	exit 1
}
[ -n "$wasm_test" ] || name=$(sed -n 's/^name = "\(.*\)"/\1/p' "$crate/Cargo.toml" | head -1 | tr - _)
root=$(cd "$here/../../.." && pwd)
# --remap-path-prefix: the output does not depend on where the repo is.
opt="--edition 2021 -C opt-level=3 -C panic=abort -C codegen-units=1 --remap-path-prefix=$root=."
if [ -n "$native" ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	# shellcheck disable=SC2086 # opt is a list
	"$RUSTC" $opt --crate-type rlib --crate-name streamd "$sdk/src/lib.rs" -o "$tmp/libstreamd.rlib"
	# shellcheck disable=SC2086
	"$RUSTC" $opt --crate-type rlib --crate-name "$name" --extern streamd="$tmp/libstreamd.rlib" \
		"$crate/src/lib.rs" -o "$tmp/lib$name.rlib"
	# shellcheck disable=SC2086
	"$RUSTC" $opt -C lto --crate-type bin --extern streamd="$tmp/libstreamd.rlib" \
		--extern "$name=$tmp/lib$name.rlib" -L "$tmp" "$crate/bench_native.rs" -o "$out"
	echo "built $out (native)"
	exit 0
fi
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
# target-feature: the Wasm features wazero runs (docs/abi.md "Wasm
# features"): memory.copy/fill for copies, SIMD for LLVM's vectorizer
# (docs/benchmarks.md).
flags="$opt --target $WASM_TARGET -C target-feature=+bulk-memory,+simd128,+nontrapping-fptoint"
if [ -n "$wasm_test" ]; then
	# shellcheck disable=SC2086 # flags is a list
	"$RUSTC" $flags --test "$src" -o "$out"
	echo "built $out (tests of $src, $WASM_TARGET)"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2086 # flags is a list
"$RUSTC" $flags --crate-type rlib --crate-name streamd "$sdk/src/lib.rs" -o "$tmp/libstreamd.rlib"
# shellcheck disable=SC2086
"$RUSTC" $flags -C lto -C strip=symbols --crate-type cdylib --crate-name "$name" \
	--extern streamd="$tmp/libstreamd.rlib" -L "$tmp" "$crate/src/lib.rs" -o "$out"
echo "built $out ($(wc -c <"$out") bytes, $WASM_TARGET)"
