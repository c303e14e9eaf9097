# ehsink — see README.md. `make help` lists the targets.
GO       ?= go
BIN      := bin/ehsink
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
CONFIG   ?= connectors.yaml
FUZZTIME ?= 5s

.PHONY: help build run test unit fuzz lint tools services bench clean

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-9s %s\n", $$1, $$2}'

build: ## build bin/ehsink
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/ehsink

run: build ## run the connectors in connectors.yaml (the shipped one needs nothing but Go)
	./$(BIN) run -c $(CONFIG)

test: tools lint unit fuzz ## everything CI runs: services, gofmt + vet, unit and integration tests (-race), short fuzzing

unit: ## go test -race over every package (PostgreSQL and Azurite are started by the tests)
	$(GO) test -race -count=1 -timeout 30m ./...

fuzz: ## run every fuzz target for FUZZTIME each (a failure is rerun once: a real crasher is kept in testdata and fails again)
	@set -e; for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for target in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | cut -d' ' -f2); do \
	    echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
	    if ! $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg >/tmp/ehsink-fuzz.log 2>&1; then \
	      cat /tmp/ehsink-fuzz.log; echo "fuzz $$target failed; running it again"; \
	      $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg; \
	    fi; \
	  done; \
	done

lint: ## gofmt check and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

tools: ## install test tools that are not Go modules (Azurite into .tools/, PostgreSQL 15 when missing)
	bash scripts/install-tools.sh
	bash scripts/install-postgres.sh

bench: ## run the benchmarks (emulator, sinks)
	$(GO) test -run '^$$' -bench . -benchmem -timeout 30m ./emulator/... ./sinks/...

clean: ## remove build output and local state (.ehsink/)
	rm -rf bin .ehsink
