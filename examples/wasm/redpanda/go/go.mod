module github.com/streamd/streamd/examples/wasm/redpanda/go

go 1.26

require github.com/redpanda-data/redpanda/src/transform-sdk/go/transform v1.1.0
