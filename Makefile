# redlock-proxy. The two commands a newcomer needs:
#   make run    start the proxy on 127.0.0.1:6380 with embedded masters (--dev)
#   make test   run every test (integration tests use redis-server if installed)

GO      ?= go
PKGS    := ./...
FUZZTIME ?= 60s
# The version stamped into the binary (INFO server, --version, go_build_info):
# git describe (v0.1.0-3-gabc1234 gives 0.1.0-3-gabc1234), or "devel" outside
# a git checkout. VERSION=x.y.z make release to choose it.
VERSION ?= $(or $(shell git describe --tags --always --dirty 2>/dev/null | sed 's/^v//'),devel)
LDFLAGS := -X github.com/redlock-proxy/redlock-proxy/internal/buildinfo.version=$(VERSION)

.PHONY: soak-faults run test build vet fmt check fuzz soak chaos clients bench bench-quick clean examples dropin release simulate

run:
	$(GO) run -ldflags "$(LDFLAGS)" ./cmd/redlock-proxy --dev

# The packages but the engine's (quorum) and tests/ first, two at a time;
# then the engine's on its own: its unit tests count 50 ms master
# timeouts, which other tests running beside them on 2 cores can starve.
# -parallel 4: the engine's parallel unit tests, four at once;
# tests/ runs last, on its own, in two lanes side by side (tests/harness_test.go):
# one test at a time of those that load the CPU, beside up to three of those
# that mostly wait (Redis Cluster scenarios, expiries, quarantines, rolling
# restarts); -parallel 128 so that testing's own limit never holds a lane.
# The third step is the deterministic simulation's fixed seeds and its
# negative controls, and TestEverySubset with its 5-master rows, without
# the race detector (ten times faster; the first step runs a few seeds,
# and the 3-master rows, with it).
# GORACE=atexit_sleep_ms=0: a -race binary sleeps 1 s at exit by default
# (for reports from goroutines still running); every test binary and
# every proxy the tests start would pay it (about 15 s of make test).
test: export GORACE = atexit_sleep_ms=0
test:
	@command -v redis-server >/dev/null || { \
	  echo "!!! WARNING: redis-server not found: integration tests run against EMBEDDED miniredis"; \
	  echo "!!! masters, NOT real Redis, and tests that need real masters are skipped."; \
	  echo "!!! Install redis-server (apt-get install -y redis-server) for the real test."; }
	$(GO) test -race -count=1 -parallel 4 -timeout 9m $$($(GO) list $(PKGS) | grep -v -e '/tests$$' -e '/quorum$$')
	$(GO) test -race -count=1 -parallel 4 -timeout 9m ./quorum
	$(GO) test -race -count=1 -parallel 128 -timeout 9m ./tests
	$(GO) test -count=1 -run '^(TestSimulate.*|TestEverySubset)$$' ./quorum

# The deterministic simulation on random seeds for SIM (default 60s): it
# says how many runs, operations and faults it covered, and a failure
# prints its seed, its shortest schedule and the command that replays it.
SIM ?= 60s
simulate:
	$(GO) test -count=1 -timeout 0 -run '^TestSimulate$$' -v ./quorum -simulate.duration=$(SIM)

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/redlock-proxy ./cmd/redlock-proxy

# Static (CGO_ENABLED=0) binaries for linux/amd64 and linux/arm64 in dist/,
# with SHA256SUMS, then the Docker image redlock-proxy:$(VERSION) when a
# Docker engine answers (it says so, and skips it, when none does).
RELEASE_ARCHS := amd64 arm64
release:
	rm -rf dist && mkdir -p dist
	@for arch in $(RELEASE_ARCHS); do \
	  echo "building dist/redlock-proxy-$(VERSION)-linux-$$arch"; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" \
	    -o dist/redlock-proxy-$(VERSION)-linux-$$arch ./cmd/redlock-proxy || exit 1; \
	done
	cd dist && sha256sum redlock-proxy-* > SHA256SUMS && cat SHA256SUMS
	@if docker info >/dev/null 2>&1; then \
	  docker build --build-arg VERSION=$(VERSION) -t redlock-proxy:$(VERSION) . ; \
	else \
	  echo "!!! no Docker engine answers (docker info failed): the image redlock-proxy:$(VERSION) was NOT built."; \
	  echo "!!! Where one runs: docker build --build-arg VERSION=$(VERSION) -t redlock-proxy:$(VERSION) ."; \
	fi

# Every example (examples/python, examples/node, examples/go) against a
# --dev proxy on a free port; fails if any of them does.
examples:
	GO=$(GO) bash examples/run.sh

vet:
	$(GO) vet $(PKGS)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt would change:"; gofmt -l $$(git ls-files '*.go'); exit 1; }

# The static checks CI runs before the tests: go vet, gofmt, staticcheck
# (installed into bin/ at the pinned version on first use) and go mod tidy;
# then 10 s of the Lua recogniser's fuzz target (make fuzz runs them all longer),
# without minimising new inputs: a minimisation cut off by -fuzztime fails the
# run with "context deadline exceeded" although nothing failed.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := bin/staticcheck
check: vet
	@$(STATICCHECK) -version 2>/dev/null | grep -qF '($(patsubst v%,%,$(STATICCHECK_VERSION)))' || { \
	  echo "installing staticcheck $(STATICCHECK_VERSION) into bin/"; \
	  GOBIN=$(CURDIR)/bin $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); }
	$(STATICCHECK) $(PKGS)
	$(GO) mod tidy -diff
	$(GO) test ./internal/luashape -run '^$$' -fuzz '^FuzzRecognise$$' -fuzztime 10s -fuzzminimizetime 0

# Node.js clients (ioredis, node-redis v4/v5/v6, node-redlock v5) for the real-client tests,
# and the drop-in corpus's libraries (tests/dropin).
clients:
	cd tests/clients && npm install --no-audit --no-fund --no-package-lock
	cd tests/dropin && npm install --no-audit --no-fund --no-package-lock --legacy-peer-deps

# The drop-in corpus (issue 24): lock libraries and hand-written idioms,
# unchanged, through two dropin proxies on 5 redis-server masters, against
# one plain redis-server as the baseline; prints a table. Installs its
# Node.js libraries (tests/dropin) and the nested Go modules
# (tests/dropin/go) first. One row: make dropin DROPIN_RUN='redis-py-lock$$' ($$ is make's $)
# --legacy-peer-deps: ioredis-lock 4 names ioredis ~4 as a peer, which it gets
# as ioredis4 beside the ioredis 5 of the other libraries.
DROPIN_RUN ?=
DROPIN_PARALLEL ?= 3
dropin:
	cd tests/dropin && npm install --no-audit --no-fund --no-package-lock --legacy-peer-deps
	cd tests/dropin/go/loop && $(GO) mod download
	cd tests/dropin/go && $(GO) mod download
	cd tests/dropin/go/redsync411 && $(GO) mod download
	REDLOCK_DROPIN=1 $(GO) test -count=1 -v -timeout 60m -parallel $(DROPIN_PARALLEL) \
		-run 'TestDropinCorpus/$(DROPIN_RUN)' ./tests

# The proxy beside go-redsync, Redlock written directly on rueidis and
# node-redlock (when node is installed; its modules are installed into
# tests/clients first when npm is there) on the same 5 local redis-server
# masters (needs redis-server): cycles/s,
# latencies and CPU per cycle at 1, 16 and 64 clients and contended,
# multi-resource locks, semaphores, fair locks, pipelined clients
# (redis-benchmark), what a cycle's scripts cost a master, idle-connection
# memory, cost of masters. About 14 minutes; one section alone with
# `go run ./cmd/redlock-bench -only cycles` (cycles, multi, sem, fair,
# pipeline, scripts, capacity, idle or scale); see
# cmd/redlock-bench -h for the knobs.
bench:
	@if command -v npm >/dev/null; then cd tests/clients && npm install --no-audit --no-fund --no-package-lock >/dev/null; fi
	$(GO) run ./cmd/redlock-bench

bench-quick:
	$(GO) run ./cmd/redlock-bench -quick

# The soak: SOAK minutes (default 10) of every primitive under every
# fault in turn (tests/chaos_test.go, TestChaosSoak), each 90 s segment
# checked, with the proxies' memory and goroutines sampled; not part of
# `make test`.
SOAK ?= 10
soak:
	REDLOCK_SOAK=$(SOAK) $(GO) test -count=1 -timeout 0 -v -run '^TestChaosSoak$$' ./tests

# The fault tests, FAULTS times longer (flapping masters, contention while
# a master dies, a proxy killed mid-command); not part of `make test`.
FAULTS ?= 10
soak-faults:
	REDLOCK_SOAK=$(FAULTS) $(GO) test -race -count=1 -timeout 60m -v \
		-run 'TestSlowMastersExclusion|TestFencesUnderContention|TestProxyKilledMidCommand' ./tests

# The project's own fault run (tests/chaos_test.go): two proxies on 5
# real masters, workers on every primitive, one fault schedule per
# scenario (2 of 5 paused, one slowed 300 ms, killed and restarted empty,
# a proxy killed, clients hanging up mid-wait), a checker over the recorded
# grants, and the availability table, once with each primitive on its own
# resources and once with every primitive on shared ones (TestChaosShared);
# then AUTOEXTEND leases kept through the
# same faults (TestChaosLeases). About 3 minutes; CHAOS=10 runs each
# scenario 10 times longer, and the leases 10 runs of 2 minutes. Not part
# of `make test` (CI runs it after). REDLOCK_CHAOS_GAPS=1 lists every
# interval without a grant, with the faults' spans around it.
CHAOS ?= 1
chaos:
	REDLOCK_CHAOS=$(CHAOS) $(GO) test -race -count=1 -timeout 60m -v \
		-run 'TestChaos' ./tests

# Each fuzz target for $(FUZZTIME); not part of `make test`.
fuzz:
	$(GO) test ./commands -run '^$$' -fuzz '^FuzzParseLock$$' -fuzztime $(FUZZTIME)
	$(GO) test ./commands -run '^$$' -fuzz '^FuzzUnlockExtendArgs$$' -fuzztime $(FUZZTIME)
	$(GO) test ./proxy -run '^$$' -fuzz '^FuzzParseInt$$' -fuzztime $(FUZZTIME)
	$(GO) test ./proxy -run '^$$' -fuzz '^FuzzReader$$' -fuzztime $(FUZZTIME)
	$(GO) test ./proxy -run '^$$' -fuzz '^FuzzCommands$$' -fuzztime $(FUZZTIME)
	$(GO) test ./proxy -run '^$$' -fuzz '^FuzzGlob$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/luashape -run '^$$' -fuzz '^FuzzRecognise$$' -fuzztime $(FUZZTIME)
	$(GO) test ./quorum/redisnode -run '^$$' -fuzz '^FuzzParseReply$$' -fuzztime $(FUZZTIME)

clean:
	rm -rf bin dist
