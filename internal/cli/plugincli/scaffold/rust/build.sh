#!/bin/sh
# Builds plugin.wasm with cargo, with the first Rust here that builds for
# Wasm (README.md, "Which Rust"):
#   1. cargo on PATH, when its rustc has a wasm32-wasip1 standard library:
#      rustup (stable, after `rustup target add wasm32-wasip1`, or the
#      toolchain rust-toolchain.toml or RUSTUP_TOOLCHAIN names), or any
#      other Rust 1.78+ with that target;
#   2. $STREAMD_RUST_WEB (default /opt/streamd-rust-web): the modern Rust
#      of a streamd checkout's `scripts/install-tools rust-web` (Debian's
#      rustc-web 1.96, installed beside Debian's rustc);
#   3. Debian's cargo and rustc 1.63 ($STREAMD_DEBIAN_RUST, default /usr)
#      with libstd-rust-dev-wasm32 (its target is wasm32-wasi).
# If none can, it says in one line what is missing and how to install it.
set -eu
cd "$(dirname "$0")"
web=${STREAMD_RUST_WEB:-/opt/streamd-rust-web}
deb=${STREAMD_DEBIAN_RUST:-/usr}
has_std() { # has_std RUSTC TARGET: RUSTC has a standard library for TARGET
	sysroot=$("$1" --print sysroot 2>/dev/null) && [ -n "$sysroot" ] &&
		ls "$sysroot/lib/rustlib/$2/lib/" 2>/dev/null | grep -q '^libstd-'
}
cargo= rustc= target=
if command -v cargo >/dev/null 2>&1 && command -v rustc >/dev/null 2>&1 && has_std rustc wasm32-wasip1; then
	cargo=cargo rustc=rustc target=wasm32-wasip1
elif [ -x "$web/bin/cargo" ] && has_std "$web/bin/rustc" wasm32-wasip1; then
	cargo=$web/bin/cargo rustc=$web/bin/rustc target=wasm32-wasip1
elif [ -x "$deb/bin/cargo" ] && has_std "$deb/bin/rustc" wasm32-wasi; then
	cargo=$deb/bin/cargo rustc=$deb/bin/rustc target=wasm32-wasi
else
	# What is missing, most likely first: the wasm32 target of the Rust the
	# author uses, else Debian's pieces, else a Rust.
	if command -v rustup >/dev/null 2>&1 && command -v rustc >/dev/null 2>&1; then
		echo "build.sh: $(rustc --version 2>/dev/null || echo "rustup's rustc") has no wasm32-wasip1 standard library: run: rustup target add wasm32-wasip1" >&2
	elif [ -x "$deb/bin/rustc" ] && ! has_std "$deb/bin/rustc" wasm32-wasi; then
		echo "build.sh: $("$deb/bin/rustc" --version) has no wasm32 standard library: run: sudo apt-get install libstd-rust-dev-wasm32" >&2
	elif [ -x "$deb/bin/rustc" ]; then
		echo "build.sh: $("$deb/bin/rustc" --version) builds for Wasm but there is no cargo for it: run: sudo apt-get install cargo" >&2
	elif command -v rustc >/dev/null 2>&1; then
		echo "build.sh: $(rustc --version) has no wasm32-wasip1 standard library and no rustup to add it: install rustup (https://rustup.rs), then run: rustup target add wasm32-wasip1" >&2
	elif [ -f /etc/debian_version ]; then
		echo "build.sh: no Rust that builds for Wasm (no cargo, no rustc): run: sudo apt-get install cargo rustc libstd-rust-dev-wasm32 (or rustup: https://rustup.rs, with --target wasm32-wasip1)" >&2
	else
		echo "build.sh: no Rust that builds for Wasm (no cargo, no rustc): install rustup (https://rustup.rs), then run: rustup target add wasm32-wasip1" >&2
	fi
	exit 1
fi
# RUSTC and RUSTDOC: cargo runs this toolchain's, not whatever rustc comes
# first on PATH (rustup's, for Debian's cargo). For cargo on PATH they stay
# as they are (rustup picks the toolchain for both).
if [ "$cargo" = cargo ]; then
	cargo build --release --target "$target"
else
	RUSTC=$rustc RUSTDOC=${rustc%rustc}rustdoc "$cargo" build --release --target "$target"
fi
cp "target/$target/release/@CRATE@.wasm" plugin.wasm
echo "built plugin.wasm ($(wc -c <plugin.wasm) bytes) with $("$rustc" --version) for $target"
