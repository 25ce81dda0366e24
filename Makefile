# streamd developer targets. The test command is scripts/test (see README).
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BENCH ?= .
BENCHTIME ?= 1s
BENCHCOUNT ?= 6

.PHONY: build run test lint examples bench clean tools dist

## build: bin/streamd
build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/streamd ./cmd/streamd

## run: the quickstart: build streamd and the Go downgrade plugin, run config.toml
run: build
	bash examples/wasm/go/orders-downgrade/build.sh
	bin/streamd run -c config.toml

## test: the full test command (services, examples, both Kafka passes)
test:
	scripts/test

## lint: golangci-lint at the pinned version with .golangci.yml (scripts/lint; scripts/test runs it)
lint:
	scripts/lint

## examples: run every examples/**/build.sh, in sorted order; stop at the first failure
examples:
	@scripts=$$(find examples -name build.sh -not -path '*/node_modules/*' -not -path '*/target/*' | LC_ALL=C sort); \
	if [[ -z $$scripts ]]; then echo "make examples: no examples/**/build.sh"; exit 0; fi; \
	for s in $$scripts; do \
		echo "==> $$s"; \
		start=$$SECONDS; \
		if ! bash "$$s"; then echo "make examples: FAILED: $$s" >&2; exit 1; fi; \
		echo "    ok ($$((SECONDS - start))s)"; \
	done

## bench: go test -bench over every package; results in bin/bench.txt (compare runs with benchstat)
bench:
	@mkdir -p bin
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchtime $(BENCHTIME) -count $(BENCHCOUNT) ./... | tee bin/bench.txt

## dist: the static binary, .deb, .rpm, OCI image and Helm chart in dist/ (scripts/dist;
## make dist VERSION=1.2.3, DIST_ARCH="amd64 arm64")
dist:
	scripts/dist $(if $(filter command line environment,$(origin VERSION)),--version $(VERSION))

## tools: install every tool the tests need (scripts/install-tools)
tools:
	scripts/install-tools

## clean: remove build outputs and built example plugins
clean:
	rm -rf bin data dist
	find examples -name plugin.wasm -not -path '*/node_modules/*' -delete
