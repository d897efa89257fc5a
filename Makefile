# Legate's build. `make run` and `make test` are the two commands a newcomer needs.
GO        ?= go
BIN       := bin/legate
PKGS      := ./...
RUN_ARGS  ?=

.PHONY: all build run test e2e bench fuzz vet fmt clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/legate

# Runs Legate on the configuration embedded in the binary (admin on 127.0.0.1:9901).
run: build
	./$(BIN) $(RUN_ARGS)

vet:
	$(GO) vet $(PKGS)

test: vet
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

# Tests that need Debian tools (promtool, chromium); installs them when missing.
e2e: build
	./scripts/install-e2e-deps.sh
	LEGATE_E2E_TOOLS=1 $(GO) test -race -count=1 -timeout 30m ./test/e2e/... ./admin/... ./stats/...

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 1 -timeout 30m $(PKGS)

# Runs each fuzz target briefly; FUZZTIME raises the budget.
FUZZTIME ?= 20s
fuzz:
	./scripts/fuzz-all.sh $(FUZZTIME)

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
