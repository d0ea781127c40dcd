# kitd: `make run` starts one node with a demo workspace; `make test` runs
# every test (tiers: unit, race, e2e, faults).
GO      ?= go
BIN     := bin/kitd
DATA    ?= ./data
PKGS    := ./...
STATICCHECK_VERSION := v0.8.2

.PHONY: run cluster build test unit race e2e faults fuzz lint lint-openapi proto bench clean tools

run: build
	$(BIN) serve --data $(DATA) --demo

# Three nodes on loopback (HTTP 8080-8082), each on its own directory under
# data-cluster/, the first with the demo workspace; Ctrl-C drains them.
cluster: build
	BIN=$(BIN) DATA=./data-cluster scripts/cluster.sh

build:
	$(GO) build -o $(BIN) ./cmd/kitd
	$(GO) build -o bin/kit ./cmd/kit

# The tiers (README.md, "Tests"): `make unit` the tests next to the code,
# in seconds to a minute; `make race` the same under the race detector;
# `make e2e` the end-to-end suite against a real bin/kitd on loopback
# ports, less its fault runs; `make faults` those (Jepsen histories, kill
# -9, pauses, partitions: minutes). `make test` is every one of them but
# race, the unit, end-to-end and fault tiers at once (-j: the end-to-end
# tests wait on HTTP far more than they compute).
# The actors' unit tests run twice: committing to the store, and through
# one raft group per partition (replica.Log), as a node of a cluster
# commits.
test: build
	$(MAKE) --no-print-directory -j3 -O unit e2e faults

# Every package but the end-to-end suite (e2e/jepsen, e2e/clusterview are
# unit tests of its checkers).
UNIT_PKGS = $$($(GO) list $(PKGS) | grep -v '/e2e$$')

unit:
	$(GO) test -count=1 -timeout 20m $(UNIT_PKGS)
	KITD_TEST_REPLICATED=1 $(GO) test -count=1 ./actors/

# Under -race the slowest packages first (bench/README.md "CI wall
# time"): go test starts packages in the order given, two at a time on 2
# cores, and a long one met last in alphabetical order (http/internal/upload,
# four minutes on a loaded machine) was the whole tier's tail. A package
# the list names that no longer exists is passed over.
RACE_FIRST := actors http/internal/upload cluster bench/cmd/kitbench http/app
RACE_PKGS = $$($(GO) list $(PKGS) | grep -v '/e2e$$' | awk -v first='$(RACE_FIRST)' -v mod="$$($(GO) list -m)" \
	'BEGIN { n = split(first, f, " "); for (i = 1; i <= n; i++) rank[mod "/" f[i]] = i } \
	$$0 in rank { head[rank[$$0]] = $$0; next } { rest[++m] = $$0 } \
	END { for (i = 1; i <= n; i++) if (i in head) print head[i]; for (i = 1; i <= m; i++) print rest[i] }')

race:
	$(GO) test -count=1 -race -timeout 30m $(RACE_PKGS)

# The fault runs of e2e/: the Jepsen histories (e2e/jepsen_test.go,
# e2e/cluster_jepsen_test.go), the durability tests under kill -9
# (e2e/durability_test.go) and backups whose members die
# (e2e/backup_faults_test.go). A new fault test joins them by its name.
FAULTS := ^(TestJepsen|TestClusterJepsen|TestClusterStartJoinLeaveUnderLoad|TestDurability|TestBackupFaults)
E2E_ENV = KITD_BIN=$(CURDIR)/$(BIN) KIT_CLI_BIN=$(CURDIR)/bin/kit

E2E_TEST = $(E2E_ENV) $(GO) test -count=1 -timeout 20m

# The end-to-end tier runs as three go test processes at once, each with
# a share of the tests (every test in exactly one), so that the long
# sequential ones do not hold up the rest: Go runs a package's parallel
# tests only once its sequential tests are done. The clusters, which
# start three nodes each and run one at a time (E2E_CLUSTERS); the
# sign-in timing test, 72 bcrypt sign-ins one after another (E2E_APART:
# as a parallel test it would start last, its file coming late, and end
# last); and the rest. Each prints its output when all three are done.
# KITD_OPENAPI_COVERAGE=1 lists per process what it did not exchange: for
# the suite's whole list, run `go test ./e2e/` as one process.
E2E_CLUSTERS := ^TestCluster
E2E_APART := ^TestSignIn_TimingDoesNotTellEmails$$

e2e: build
	$(GO) test -c -o /dev/null ./e2e/
	@out=$$(mktemp -d); status=0; \
	$(E2E_TEST) -run '$(E2E_CLUSTERS)' -skip '$(FAULTS)' ./e2e/ >$$out/clusters 2>&1 & clusters=$$!; \
	$(E2E_TEST) -run '$(E2E_APART)' ./e2e/ >$$out/apart 2>&1 & apart=$$!; \
	$(E2E_TEST) -skip '$(FAULTS)|$(E2E_CLUSTERS)|$(E2E_APART)' ./e2e/ >$$out/rest 2>&1 || status=1; \
	wait $$clusters || status=1; wait $$apart || status=1; \
	echo "e2e, the clusters (-run '$(E2E_CLUSTERS)' -skip '$(FAULTS)'):"; cat $$out/clusters; \
	echo "e2e, apart (-run '$(E2E_APART)'):"; cat $$out/apart; \
	echo "e2e, the rest (-skip '$(FAULTS)|$(E2E_CLUSTERS)|$(E2E_APART)'):"; cat $$out/rest; \
	rm -rf $$out; exit $$status

faults: build
	$(E2E_ENV) $(GO) test -count=1 -timeout 20m -run '$(FAULTS)' ./e2e/

# Every fuzz target (found by .ci/fuzz) for FUZZTIME each, one after
# another. `make test` runs only their seed corpora, as ordinary tests.
FUZZTIME ?= 10s
FUZZFLAGS ?=
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) FUZZFLAGS='$(FUZZFLAGS)' .ci/fuzz

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
