# Legate's build. `make run` and `make test` are the two commands a newcomer needs.
GO        ?= go
BIN       := bin/legate
PKGS      := ./...
RUN_ARGS  ?=

.PHONY: all build run test e2e bench bench-peers bench-syscalls bench-ab bench-rss fuzz vet fmt clean

all: build

# CGO_ENABLED=0: only the net package's DNS resolver would use cgo, and linking it maps libc and
# the dynamic loader into the process (1.5 to 2 MB of its resident set, bench/rss.sh); the Go
# resolver reads the same /etc/hosts and /etc/resolv.conf.
build:
	CGO_ENABLED=0 $(GO) build -o $(BIN) ./cmd/legate

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

# The HTTP/2, gRPC-shaped and TLS rounds against nginx (bench/peers-h2-tls.sh; installs nginx,
# nghttp2-client and wrk when missing, or skips saying why). Wants an otherwise idle machine.
bench-peers: build
	PROJECT_BIN=$(BIN) ./bench/peers-h2-tls.sh

# System calls per proxied HTTP/1.1 request, Legate and nginx counted alike with perf
# (bench/syscalls.sh): the figure a loaded machine does not distort.
bench-syscalls: build
	PROJECT_BIN=$(BIN) ./bench/syscalls.sh

# HTTP/1.1 req/s and p99 of this build (and of OLD=path, another build) against nginx, measured in
# interleaved rounds (bench/ab.sh); HAPROXY=1 adds HAProxy. A copy of the binary is measured: go
# build's own output sits in large page-cache folios and reads more RSS.
bench-ab: build
	cp $(BIN) $(BIN).ab && ./bench/ab.sh $(OLD) $(BIN).ab

# Where Legate's resident memory is (bench/rss.sh): its pages by ELF section, anonymous memory,
# once ready, after wrk load and with 10,000 idle connections.
bench-rss: build
	PROJECT_BIN=$(BIN) ./bench/rss.sh

# Runs each fuzz target briefly; FUZZTIME raises the budget.
FUZZTIME ?= 20s
fuzz:
	./scripts/fuzz-all.sh $(FUZZTIME)

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
