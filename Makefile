# kitd: `make run` starts one node with a demo workspace; `make test` runs every test.
GO      ?= go
BIN     := bin/kitd
DATA    ?= ./data
PKGS    := ./...
STATICCHECK_VERSION := v0.8.2

.PHONY: run cluster build test unit e2e fuzz lint lint-openapi proto bench clean tools

run: build
	$(BIN) serve --data $(DATA) --demo

# Three nodes on loopback (HTTP 8080-8082), each on its own directory under
# data-cluster/, the first with the demo workspace; Ctrl-C drains them.
cluster: build
	BIN=$(BIN) DATA=./data-cluster scripts/cluster.sh

build:
	$(GO) build -o $(BIN) ./cmd/kitd
	$(GO) build -o bin/kit ./cmd/kit

# Every test: unit tests next to the code, then end-to-end tests against a
# real bin/kitd on loopback ports.
# The actors' tests run twice: committing to the store, and through one
# raft group per partition (replica.Log), as a node of a cluster commits.
test: build
	$(GO) test -count=1 -timeout 20m $(PKGS)
	KITD_TEST_REPLICATED=1 $(GO) test -count=1 ./actors/

# Every fuzz target (found by .ci/fuzz) for FUZZTIME each, one after
# another. `make test` runs only their seed corpora, as ordinary tests.
FUZZTIME ?= 10s
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) .ci/fuzz

unit:
	$(GO) test -count=1 $$($(GO) list ./... | grep -v /e2e)

e2e: build
	KITD_BIN=$(CURDIR)/$(BIN) KIT_CLI_BIN=$(CURDIR)/bin/kit $(GO) test -count=1 -timeout 15m ./e2e/

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)
	@if [ -x $(REDOCLY) ]; then $(MAKE) --no-print-directory lint-openapi; \
	else echo "lint-openapi skipped: Redocly is not installed (cd docs/openapi && npm ci)"; fi

# The OpenAPI documents (docs/openapi) with Redocly CLI, pinned in
# docs/openapi/package.json and installed there by `npm ci` (.ci/run does);
# docs/openapi/redocly.yaml says which rules apply and why some do not.
# Telemetry is off: a lint must not call out.
REDOCLY := docs/openapi/node_modules/.bin/redocly
lint-openapi:
	cd docs/openapi && REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true ./node_modules/.bin/redocly lint --format=stylish

# Regenerates the actor messages; needs protoc and protoc-gen-go on PATH.
proto:
	cd proto/kitpb && protoc -I . --go_out=. --go_opt=paths=source_relative *.proto

# Every scenario of bench/README.md against kitd and the trivial handler,
# the limits checks included; prints a Markdown table in under 5 minutes.
# BENCHFLAGS adds kitbench flags, e.g. BENCHFLAGS='-rate 5000/s' or '-soak'.
bench: build
	$(GO) run ./bench/cmd/kitbench -kitd $(BIN) $(BENCHFLAGS)

clean:
	rm -rf bin
