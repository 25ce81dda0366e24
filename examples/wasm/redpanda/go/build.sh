#!/bin/sh
# Builds the example transforms of Redpanda's Go SDK
# (github.com/redpanda-data/redpanda/src/transform-sdk/go/transform v1.1.0,
# from the Go module proxy) as Redpanda builds Go transforms:
# GOOS=wasip1 GOARCH=wasm go build. The SDK ships its examples as Example
# functions of its package's tests (example_*_test.go); each is built
# unchanged as a program: the file, with its package clause made `package
# main` and a main that calls the Example function. Nothing of the SDK is
# kept in this repository: go downloads it. The .wasm files land next to
# this script: regexp_filter.wasm, identity.wasm (example_mirror_test.go),
# transcoding.wasm and validation.wasm (which writes invalid JSON to a
# second topic, invalid_json).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
sdk=$(go list -m -f '{{.Dir}}' github.com/redpanda-data/redpanda/src/transform-sdk/go/transform)
[ -n "$sdk" ] && [ -d "$sdk" ] || go mod download github.com/redpanda-data/redpanda/src/transform-sdk/go/transform
sdk=$(go list -m -f '{{.Dir}}' github.com/redpanda-data/redpanda/src/transform-sdk/go/transform)
build() { # build FILE FUNC OUT
	dir=$here/build/$3
	rm -rf "$dir"
	mkdir -p "$dir"
	sed 's/^package transform_test$/package main/' "$sdk/$1" >"$dir/example.go"
	grep -q '^package main$' "$dir/example.go" || { echo "$0: $1 has no package clause transform_test" >&2; exit 1; }
	printf 'package main\n\nfunc main() { %s() }\n' "$2" >"$dir/main.go"
	GOOS=wasip1 GOARCH=wasm go build -trimpath -o "$here/$3.wasm" "./build/$3"
}
build example_regexp_filter_test.go Example_regularExpressionFilter regexp_filter
build example_mirror_test.go Example_identityTransform identity
build example_transcoding_test.go Example_transcoding transcoding
build example_validation_test.go Example_validation validation
rm -rf "$here/build"
echo "built regexp_filter.wasm identity.wasm transcoding.wasm validation.wasm with $(go version)"
