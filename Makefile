# ehsink — see README.md. `make help` lists the targets.
GO       ?= go
BIN      := bin/ehsink
STATIC_BIN ?= bin/ehsink-static
IMAGE    ?= ehsink:$(VERSION)
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# COMMIT is the full revision, "-dirty" when the work tree has changes;
# empty outside a git checkout (the binary then says "unknown").
COMMIT   ?= $(shell c=$$(git rev-parse HEAD 2>/dev/null) && { git diff --quiet HEAD 2>/dev/null && echo $$c || echo $$c-dirty; })
# The version and commit go to main (what `ehsink version` prints) and to
# internal/buildinfo (what the sinks write into their output, such as
# Parquet's created_by).
BUILDINFO := github.com/ehsink/ehsink/internal/buildinfo
LDFLAGS  := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).commit=$(COMMIT)
CONFIG   ?= connectors.yaml
FUZZTIME ?= 5s

.PHONY: help build build-static config-test image run test unit fuzz lint tools services bench bench-e2e bench-e2e-avro bench-fresh bench-balance chaos chaos-short chaos-ci clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-13s %s\n", $$1, $$2}'

build: ## build bin/ehsink
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/ehsink

# build-static is the container's build step (the Dockerfile runs exactly this
# target) and part of `make test`, so the image's build is exercised wherever
# CI runs, with or without a container engine. The check after the build
# fails when the binary needs a dynamic loader (it would not start on a
# distroless/static or scratch image).
build-static: ## build STATIC_BIN: CGO_ENABLED=0, trimmed paths, no dynamic loader (what the Dockerfile runs)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS) -s -w' -o $(STATIC_BIN) ./cmd/ehsink
	@$(GO) version -m $(STATIC_BIN) | grep -q 'CGO_ENABLED=0' || { echo "$(STATIC_BIN): not built with CGO_ENABLED=0"; exit 1; }
	@if LC_ALL=C readelf -l $(STATIC_BIN) 2>/dev/null | grep -q 'Requesting program interpreter'; then echo "$(STATIC_BIN): dynamically linked"; exit 1; fi
	@echo "$(STATIC_BIN): static"

config-test: build-static ## run `ehsink test` over CONFIG and its tests (connectors_test.yaml): mappings checked, no services
	./$(STATIC_BIN) test -c $(CONFIG)

image: ## build the container image IMAGE (needs docker or podman; the build stage runs make build-static)
	$(or $(shell command -v docker 2>/dev/null),$(shell command -v podman 2>/dev/null),$(error make image: neither docker nor podman found)) \
	  build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(IMAGE) .

# A terminal's Ctrl-C signals its whole foreground process group, and make
# itself exits 130 on a SIGINT whatever its recipe returns. So when make has
# a controlling terminal, ehsink runs as a job of its own (bash job control:
# its own process group, made the terminal's foreground group by fg) and
# Ctrl-C reaches ehsink alone: it drains and exits 0, and so does make. Job
# control reaches the terminal through the shell's own stderr, so that is
# /dev/tty, and ehsink gets the stderr make was given (fd 3): with
# `make run 2>&1 | tee run.log` Ctrl-C works the same. Without a controlling
# terminal (CI, a container, a supervisor), ehsink runs plainly and a signal
# sent to it stops it. The check for a terminal runs in a subshell: /bin/sh
# (dash on Debian) exits 2 when a special built-in's redirection fails.
run: build ## run the connectors in connectors.yaml (the shipped one needs nothing but Go); Ctrl-C stops it with status 0
	@echo '$(BIN) run -c $(CONFIG)'
	@if ( : </dev/tty ) 2>/dev/null; then \
	  bash -c 'set -m; "$$@" 2>&3 3>&- & fg %1 >/dev/null' run $(BIN) run -c $(CONFIG) 3>&2 2>/dev/tty; \
	else $(BIN) run -c $(CONFIG); fi

test: tools lint build-static config-test unit fuzz chaos-ci ## everything CI runs: services, gofmt + vet, the static (container) build, unit and integration tests (-race), short fuzzing, the short chaos matrix

# The chaos matrix is left out of `unit` (it runs in chaos-ci, alone, so
# that no other test's load weighs on its catch-up bound).
# examples/jsonfiles is a module of its own, built against this checkout by a
# replace, as a user's custom sink is: its tests run the conformance kit,
# build its binary and run `ehsink-jsonfiles test` over its config.
# -parallel 4: the tests that call t.Parallel wait on timers (fault
# tests: leases running out, outages healing) far more than they compute;
# the default, one per core, left internal/connector's running two at a time.
# -p 3: three packages at once; with two (one per core) CI used the cores
# half of its time, most packages waiting on services and timers (18.5
# minutes at two, 16 at three).
unit: ## go test -race over every package but the chaos matrix, then the deploy/ module (Dockerfile, Kubernetes manifests) and the examples/jsonfiles module (a custom sink)
	$(GO) test -race -count=1 -p 3 -parallel 4 -timeout 30m $$($(GO) list ./... | grep -v '/test/chaos$$')
	$(GO) test -count=1 -run 'Allocs$$' ./internal/table/expr # allocations are counted without -race (its sync.Pool drops at random)
	cd deploy && $(GO) test -race -count=1 -timeout 10m ./...
	cd examples/jsonfiles && $(GO) test -race -count=1 -timeout 10m ./...

fuzz: ## run every fuzz target for FUZZTIME each (a failure is rerun once: a real crasher is kept in testdata and fails again)
	@set -e; for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for target in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | cut -d' ' -f2); do \
	    echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
	    if ! $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg >/tmp/ehsink-fuzz.log 2>&1; then \
	      sed 's/^/  first run: /' /tmp/ehsink-fuzz.log; echo "fuzz $$target failed; running it again"; \
	      $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg; \
	    fi; \
	  done; \
	done

# staticcheck is a tool dependency of go.mod (`go tool staticcheck`): its
# version is pinned there, the go command builds it once into the build
# cache, and staticcheck keeps its own analysis cache, so a second run only
# looks at what changed. The deploy/ module runs the same binary.
lint: ## gofmt check, go vet and staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	cd deploy && $(GO) vet ./... && $$($(GO) -C .. tool -n staticcheck) ./...
	cd examples/jsonfiles && $(GO) vet ./... && $$($(GO) -C ../.. tool -n staticcheck) ./...

tools: ## install test tools that are not Go modules (Azurite and the JS Event Hubs SDK into .tools/, PostgreSQL 15 and the Python SDK from apt when missing)
	bash test/scripts/install-tools.sh
	bash test/scripts/install-postgres.sh
	bash test/scripts/install-python.sh

# The chaos matrix (test/chaos): MODE=full|short, EVENTS, DURATION, BALANCING
# (balanced, greedy or both), PARTITIONS, CATCHUP (bound after the producer
# stops), CHECK_POISON=0 (no rows PostgreSQL rejects), SEED, KEEP=1 (keep
# logs and data). `make test` runs the short matrix through chaos-ci.
MODE      ?= full
BALANCING ?= both
chaos: tools ## the chaos matrix: replicas, emulator, Azurite, PostgreSQL under faults; checks 0 lost, 0 duplicated
	EHSINK_CHAOS=$(MODE) EHSINK_CHAOS_BALANCING=$(BALANCING) EHSINK_CHAOS_EVENTS=$(EVENTS) EHSINK_CHAOS_DURATION=$(DURATION) \
	EHSINK_CHAOS_PARTITIONS=$(PARTITIONS) EHSINK_CHAOS_CATCHUP=$(CATCHUP) EHSINK_CHAOS_CHECK_POISON=$(CHECK_POISON) \
	EHSINK_CHAOS_SEED=$(SEED) EHSINK_CHAOS_KEEP=$(KEEP) \
	$(GO) test -count=1 -v -timeout 90m -run '^TestChaos$$' ./test/chaos/

chaos-short: tools ## the short chaos matrix (24,000 events over 75 s of faults and 2 min of network partitions, about 5 minutes per strategy; BALANCING, SEED, KEEP as for chaos)
	EHSINK_CHAOS=short EHSINK_CHAOS_BALANCING=$(BALANCING) EHSINK_CHAOS_SEED=$(SEED) EHSINK_CHAOS_KEEP=$(KEEP) \
	$(GO) test -race -count=1 -v -timeout 30m -run '^TestChaos$$' ./test/chaos/

# CI runs the short matrix for the default strategy, balanced (greedy's
# unread bound is missed by a second or so on two cores with six
# connectors: docs/testing.md); `make chaos` runs both.
# CHAOS_CI_BALANCING=greedy or both runs the other too.
CHAOS_CI_BALANCING ?= balanced
chaos-ci: tools ## the short chaos matrix as `make test` runs it: the default strategy, balanced (CHAOS_CI_BALANCING)
	EHSINK_CHAOS=short EHSINK_CHAOS_BALANCING=$(CHAOS_CI_BALANCING) \
	$(GO) test -race -count=1 -v -timeout 20m -run '^TestChaos$$' ./test/chaos/

bench: ## run the benchmarks (emulator, sinks)
	$(GO) test -run '^$$' -bench . -benchmem -timeout 30m ./emulator/... ./sinks/...

# EVENTS is shared with `make chaos`, whose modes have defaults of their
# own: so the benchmark's default is given here, not as a global one.
bench-e2e: ## ehsink end to end against raw drain, COPY and merge baselines (EVENTS=1000000; needs PostgreSQL 15)
	EVENTS=$(or $(EVENTS),1000000) $(GO) test -run '^$$' -bench '^BenchmarkE2E$$' -benchtime 1x -timeout 60m ./test/bench/

# RATES and DURATION are the benchmark's own (DURATION is also the chaos
# matrix's, with a meaning of its own there): the defaults are the
# benchmark's, in test/bench/fresh_test.go.
bench-fresh: ## freshness: p50/p95/p99 of enqueued → committed (PostgreSQL append) at fixed rates (RATES=200,2000,20000 events/s, DURATION=15s each), at defaults beside min_events: 2000
	RATES=$(RATES) DURATION=$(DURATION) $(GO) test -run '^$$' -bench '^BenchmarkFreshness$$' -benchtime 1x -timeout 60m ./test/bench/

bench-balance: ## many partitions at default load balancing: a lone replica's claims, balance after staggered starts, failover after a kill, Blob requests and cost per partition-hour (SHAPES=32x3,100x3,1024x3,1024x10 partitions x replicas; STAGGER=2s; STEADY=1m; STORE=file for the local file store)
	SHAPES=$(SHAPES) STAGGER=$(STAGGER) STEADY=$(STEADY) STORE=$(STORE) $(GO) test -run '^$$' -bench '^BenchmarkBalance$$' -benchtime 1x -timeout 90m ./test/bench/

bench-e2e-avro: ## the Avro decode path end to end: JSON and Avro orders into PostgreSQL append, each against its hub's raw drain (EVENTS=1000000)
	EVENTS=$(or $(EVENTS),1000000) $(GO) test -run '^$$' -bench '^BenchmarkE2EAvro$$' -benchtime 1x -timeout 60m ./test/bench/

clean: ## remove build output and local state (.ehsink/)
	rm -rf bin .ehsink
