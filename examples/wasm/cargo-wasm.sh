#!/bin/sh
# cargo-wasm.sh: sourced by the build.sh of the examples built with cargo
# from crates.io (examples/wasm/redpanda, examples/wasm/fluvio). It sets
# CARGO and RUSTC to the first Rust here whose rustc is at least 1.85
# (fluvio-smartmodule is edition 2024; redpanda-transform-sdk needs 1.72)
# and has a wasm32-wasip1 standard library:
#   1. cargo and rustc on PATH (rustup after `rustup target add
#      wasm32-wasip1`, or any other Rust with that target);
#   2. $STREAMD_RUST_WEB (default /opt/streamd-rust-web): Debian's rustc-web
#      unpacked by scripts/install-tools rust-web.
# Debian's rustc 1.63 is too old for these SDKs. If none fits, it says so in
# one line and exits.
web=${STREAMD_RUST_WEB:-/opt/streamd-rust-web}
cargo_wasm_fits() { # cargo_wasm_fits RUSTC: at least 1.85, with a wasm32-wasip1 std
	v=$("$1" --version 2>/dev/null | sed -n 's/^rustc \([0-9]*\)\.\([0-9]*\)\..*/\1 \2/p')
	[ -n "$v" ] || return 1
	set -- "$1" $v
	[ "$2" -gt 1 ] || [ "$3" -ge 85 ] || return 1
	sysroot=$("$1" --print sysroot 2>/dev/null) && [ -n "$sysroot" ] &&
		ls "$sysroot/lib/rustlib/wasm32-wasip1/lib/" 2>/dev/null | grep -q '^libstd-'
}
if command -v cargo >/dev/null 2>&1 && command -v rustc >/dev/null 2>&1 && cargo_wasm_fits rustc; then
	CARGO=cargo RUSTC=rustc
elif [ -x "$web/bin/cargo" ] && cargo_wasm_fits "$web/bin/rustc"; then
	CARGO=$web/bin/cargo RUSTC=$web/bin/rustc
	RUSTDOC=$web/bin/rustdoc
	export RUSTDOC
else
	echo "$0: no Rust 1.85+ with a wasm32-wasip1 standard library: run scripts/install-tools rust-web (or rustup target add wasm32-wasip1)" >&2
	exit 1
fi
export RUSTC
# crate_dir NAME VERSION: fetches crates.io's NAME VERSION with cargo and
# prints the directory cargo unpacked it to (under CARGO_HOME).
crate_dir() {
	tmp=$(mktemp -d)
	mkdir -p "$tmp/src"
	printf '[package]\nname = "fetch-%s"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\n%s = "=%s"\n' "$1" "$1" "$2" >"$tmp/Cargo.toml"
	: >"$tmp/src/lib.rs"
	(cd "$tmp" && "$CARGO" fetch -q) || { rm -rf "$tmp"; return 1; }
	(cd "$tmp" && "$CARGO" metadata -q --format-version 1) | python3 -c '
import json, os, sys
name, version = sys.argv[1], sys.argv[2]
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == name and p["version"] == version:
        print(os.path.dirname(p["manifest_path"]))
' "$1" "$2"
	rm -rf "$tmp"
}
