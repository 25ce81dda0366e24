#!/bin/sh
# Builds the example SmartModules of Fluvio's SDK (the crate
# fluvio-smartmodule 0.50.1 from crates.io) unchanged, as SmartModules are
# built: cargo build --release --target wasm32-wasip1 of a cdylib crate
# that depends on fluvio-smartmodule. The examples are the ones the crate's
# README.md documents (filter, map, aggregate, array_map): each code block
# is taken from the README as cargo downloaded it and built as the crate's
# src/lib.rs, with Cargo.lock next to this script. Nothing of the SDK is
# kept in this repository. The .wasm files land next to this script:
# filter.wasm, map.wasm, aggregate.wasm, array_map.wasm.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../cargo-wasm.sh"
src=$(crate_dir fluvio-smartmodule 0.50.1)
[ -n "$src" ] || { echo "$0: cargo did not fetch fluvio-smartmodule 0.50.1" >&2; exit 1; }
ws=$here/target/src
rm -rf "$ws"
mkdir -p "$ws"
# One crate per README example, in one workspace (shared dependencies).
python3 - "$src/README.md" "$ws" <<'PY'
import re, sys, pathlib
readme, ws = pathlib.Path(sys.argv[1]).read_text(), pathlib.Path(sys.argv[2])
kinds = []
for lang, body in re.findall(r"```(\w+)\n(.*?)```", readme, re.S):
    m = re.search(r"#\[smartmodule\((\w+)\)\]", body)
    if lang not in ("rust", "ignore") or not m or m.group(1) == "init":
        continue
    kind = m.group(1)
    kinds.append(kind)
    crate = ws / kind
    (crate / "src").mkdir(parents=True)
    (crate / "src" / "lib.rs").write_text(body)
    deps = 'fluvio-smartmodule = "=0.50.1"\n'
    if "serde_json" in body:
        deps += 'serde_json = "1"\n'
    (crate / "Cargo.toml").write_text(
        f'[package]\nname = "{kind}"\nversion = "0.1.0"\nedition = "2024"\n\n'
        f'[lib]\ncrate-type = ["cdylib"]\n\n[dependencies]\n{deps}')
want = {"filter", "map", "aggregate", "array_map"}
if set(kinds) != want:
    sys.exit(f"README.md examples: found {sorted(kinds)}, want {sorted(want)}")
(ws / "Cargo.toml").write_text(
    '[workspace]\nresolver = "2"\nmembers = [' + ", ".join(f'"{k}"' for k in sorted(kinds)) + ']\n\n'
    '[profile.release]\nlto = true\n')
PY
# fluvio-smartmodule declares the host function copy_records in a bare
# extern "C" block; Rust 1.96 no longer links such a symbol as an import of
# module "env" by itself (rust-lang/rust#149868), so the linker is asked to,
# as Rust's release notes tell SmartModule authors to.
mkdir -p "$ws/.cargo"
printf '[target.wasm32-wasip1]\nrustflags = ["-C", "link-arg=--allow-undefined"]\n' >"$ws/.cargo/config.toml"
locked=
if [ -f "$here/Cargo.lock" ]; then
	cp "$here/Cargo.lock" "$ws/Cargo.lock"
	locked=--locked
fi
(cd "$ws" && CARGO_TARGET_DIR=$here/target "$CARGO" build -q --release $locked --target wasm32-wasip1)
[ -n "$locked" ] || cp "$ws/Cargo.lock" "$here/Cargo.lock"
for k in filter map aggregate array_map; do
	cp "$here/target/wasm32-wasip1/release/$k.wasm" "$here/$k.wasm"
done
echo "built filter.wasm map.wasm aggregate.wasm array_map.wasm with $("$RUSTC" --version)"
