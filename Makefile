# The only commands a newcomer needs. `make run` runs the quickstart study
# (on the GPU when one is usable, else on the CPU backend with a tiny model);
# `make test` is what CI runs.
GO       ?= go
PKG      := github.com/xrun-dev/xrun
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS  := -X $(PKG)/runner.version=$(VERSION) -X $(PKG)/runner.commit=$(COMMIT)
FUZZTIME ?= 30s
BENCHTIME ?= 1s

.PHONY: all build run test bench fuzz lint clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/xrun ./cmd/xrun

run: build
	./bin/xrun run --fresh experiments/quickstart.yaml

# Unit, golden and end-to-end tests; no GPU or CUDA needed (GPU tests skip).
test: lint
	$(GO) test -timeout 12m ./...

# Speed targets live here, never in unit tests.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...

# Every fuzz target in the module, FUZZTIME each (go test runs one at a time).
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 200x $$pkg; \
	  done; \
	done

# The README promises that cgo-free builds plan, report and diff: build and
# vet the whole module (tests included) that way too, so breaking it fails
# make test. go.mod and go.sum must be tidy (go mod tidy -diff prints what
# tidying would change and fails).
lint:
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) mod tidy -diff
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) build ./...
	CGO_ENABLED=0 $(GO) vet ./...

clean:
	rm -rf bin .gpu

# The Go benchmark format xrun writes is benchstat's own: render a synthetic
# results directory with `xrun report --format bench` and let the real
# benchstat compare its gemm_plugin columns.
.PHONY: benchstat-check
benchstat-check:
	@tmp=$$(mktemp) && trap 'rm -f "$$tmp"' EXIT && \
	  $(GO) run ./cmd/xrun report --format bench results/testdata/gemm > "$$tmp" && \
	  $(GO) run golang.org/x/perf/cmd/benchstat -col '/gemm_plugin@(disable auto)' "$$tmp"

# A/A pairs: the study run twice back to back, diffed, AA_PAIRS times;
# every regression xrun diff reports is a false one (bench/aa).
AA_PAIRS ?= 20
AA_SPEC  ?= experiments/quickstart.yaml
AA_SETS  ?= --set repeats=6
.PHONY: aa
aa: build
	$(GO) run ./bench/aa -pairs $(AA_PAIRS) -spec $(AA_SPEC) $(AA_SETS) -json bin/aa.json
