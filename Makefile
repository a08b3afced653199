# Freshet: `make demo` shows it working, `make test` proves it.
GO ?= go

.PHONY: demo demo-cluster test build vet fmt-check tidy-check fuzz postgres nginx node nats-server bench bench-tail clean

# Built, then run (rather than go run, which exits 1 after Ctrl-C even when
# the demo stops cleanly). DEMO_FLAGS passes flags, e.g.
# make demo DEMO_FLAGS='--rate 200 --readers 32' (docs/configuration.md).
demo: postgres
	$(GO) build -o bin/freshet ./cmd/freshet
	bin/freshet demo $(DEMO_FLAGS)

# The demo with the engine scaled out (docs/scale-out.md): PostgreSQL,
# Debian's nats-server with JetStream, a relay and three replicas, the
# ticket desk's read caches routing between them.
demo-cluster: postgres nats-server
	$(GO) build -o bin/freshet ./cmd/freshet
	bin/freshet demo cluster $(DEMO_FLAGS)

nats-server:
	@command -v nats-server >/dev/null || { if [ "$$(id -u)" = 0 ]; then apt-get install -y nats-server >/dev/null || { apt-get update >/dev/null && apt-get install -y nats-server >/dev/null; }; else echo "nats-server is missing: run sudo apt-get install nats-server"; exit 1; fi; }

# Everything CI runs: formatting, vet, go.mod tidy, every test, the race
# detector over the packages with concurrency (the kill/restart and
# scenario tests of cmd/freshet and ticketdesk included), and every fuzz
# target for a bounded time (scripts/fuzz.sh; FUZZTIME=10s each).
test: postgres nginx node fmt-check vet tidy-check
	$(GO) test -count=1 -timeout 45m ./...
	@pkgs=$$($(GO) list ./... | grep -E '/(pgwal|engine|s2s|readcache|bus|shape|cmd/freshet|ticketdesk)($$|/)' || true); \
	if [ -n "$$pkgs" ]; then echo "go test -race $$pkgs"; $(GO) test -count=1 -race -timeout 30m $$pkgs; fi
	@bash scripts/fuzz.sh

# Every fuzz target of the module, FUZZTIME each (default 10s).
fuzz:
	@bash scripts/fuzz.sh

build:
	$(GO) build -o bin/freshet ./cmd/freshet

vet:
	$(GO) vet ./...

# go mod tidy must leave go.mod and go.sum as they are.
tidy-check:
	@$(GO) mod tidy -diff >/dev/null 2>&1 || { echo "go.mod/go.sum are not tidy; run go mod tidy and commit the result:"; $(GO) mod tidy -diff; exit 1; }

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt wants to rewrite:"; echo "$$out"; exit 1; fi

postgres:
	@bash scripts/ensure-postgres.sh

# The shape API's CDN test (shape.TestCDN) runs a real nginx proxy cache.
nginx:
	@bash scripts/ensure-nginx.sh

# The shape API's Node tests (shape.TestElectricClient) run the real
# @electric-sql/client, installed by the test with npm ci from
# shape/nodetest/package-lock.json, on Node.js 20.14 or later.
node:
	@bash scripts/ensure-node.sh

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# End-to-end: freshet tail against pg_recvlogical (docs/benchmarks.md).
bench-tail: postgres
	bash scripts/bench-tail.sh

clean:
	rm -rf bin
