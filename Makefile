# configmap-attacher. `make help` lists the targets.
SHELL := /usr/bin/env bash
GO ?= go
BIN := $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/configmap-attacher/configmap-attacher/internal/cli.Version=$(VERSION)
# Each test package starts its own local control plane (controlplane.TestMain); go test
# runs at most GOMAXPROCS packages at once.
TEST_FLAGS ?= -count=1 -timeout 30m
export CONFIGMAP_ATTACHER_BIN_DIR := $(BIN)

.PHONY: help build tools tools-controlplane test unit lint run demo clean

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-20s %s\n", $$1, $$2}'

build: ## build bin/configmap-attacher (what ships) and bin/configmap-attacher-dev (it plus dev and demo: make run, make demo)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/configmap-attacher ./cmd/configmap-attacher
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/configmap-attacher-dev ./cmd/configmap-attacher-dev

tools: ## build every pinned real component into bin/ (first run: about 65 minutes on 2 cores, Argo CD about 10 of them; then skipped)
	@hack/tools/build.sh

tools-controlplane: ## build only what make run and make demo need: the control plane and its workloads (scheduler, kwok, Argo Rollouts)
	@hack/tools/build.sh etcd kube-apiserver kube-controller-manager kube-scheduler kwok rollouts-controller kubectl-argo-rollouts

test: tools lint ## run every test on the real local control plane (builds the tools first)
	$(GO) test $(TEST_FLAGS) ./...
	cd deploy/test && GOFLAGS=-mod=mod $(GO) test $(TEST_FLAGS) ./...
	$(MAKE) fuzz-short

unit: ## fast unit tests only (no control plane)
	$(GO) test -count=1 -short ./...
	cd deploy/test && GOFLAGS=-mod=mod $(GO) test -count=1 -short ./...

lint: ## go vet + gofmt check
	$(GO) vet ./...
	$(GO) vet -tags flux ./internal/flux/
	cd deploy/test && GOFLAGS=-mod=mod $(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

run: tools-controlplane build ## run the service on the embedded default (local control plane + NATS; gRPC, HTTP and the watcher); ARGS="--way-in all" passes dev flags; Ctrl-C stops
	$(BIN)/configmap-attacher-dev dev $(ARGS)

demo: tools-controlplane build ## a scripted canary on the embedded default, printed as a timeline; exit 0 only if every step held
	$(BIN)/configmap-attacher-dev demo

clean: ## remove bin/
	rm -rf $(BIN)

# --- Flux (README.md, "Flux and revisions"); not part of `make test` ---
.PHONY: test-flux

test-flux: ## the Flux proof: the real source-controller and kustomize-controller (built first: about 25 min cold) with Argo Rollouts on the local control plane
	@hack/tools/build.sh etcd kube-apiserver kube-controller-manager kube-scheduler kwok rollouts-controller source-controller kustomize-controller
	$(GO) test -tags flux $(TEST_FLAGS) ./internal/flux/

# --- deploy (deploy/README.md) ---
IMAGE ?= configmap-attacher:$(VERSION)
DOCKER ?= docker

.PHONY: docker-build deploy-test

docker-build: ## build the container image configmap-attacher:VERSION (static binary, distroless, non-root; VERSION stamped)
	$(DOCKER) build --build-arg VERSION=$(VERSION) -t $(IMAGE) .

deploy-test: tools ## the deploy proof: chart/kustomize render, server-side dry run, the service under the shipped RBAC
	cd deploy/test && GOFLAGS=-mod=mod $(GO) test $(TEST_FLAGS) ./...

# --- benchmarks (bench/README.md); not part of `make test` ---
.PHONY: bench

bench: tools build ## run the benchmarks on the local control plane; one table, JSON in bench/results/ (BENCH_QUICK=1: small sizes)
	$(GO) run ./bench/cmd/bench -binary $(BIN)/configmap-attacher -results bench/results $(BENCH_FLAGS)

# --- fuzzing (docs/reliability.md) ---
# package:target pairs; -short keeps each package's TestMain from starting a control plane.
FUZZ_TARGETS := ./internal/event:FuzzDecode ./trigger:FuzzParseSpec ./trigger:FuzzHTTPEvent ./internal/eventbus:FuzzMessage ./internal/cluster:FuzzSpecFromSecret
# A count, not a duration: with a duration, Go 1.26's fuzz coordinator can report its own
# deadline as a failure under CPU contention (golang/go#75804, fixed in Go 1.27).
FUZZ_SHORT ?= 5000x
FUZZ_TIME ?= 10m

.PHONY: fuzz fuzz-short

fuzz-short: ## a short fuzz run of every decoder (5,000 inputs each, FUZZ_SHORT; part of make test)
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
	  echo "fuzz $$pkg $$fn ($(FUZZ_SHORT))"; \
	  $(GO) test -short -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZ_SHORT) $$pkg || exit 1; done

fuzz: ## a long fuzz run of every decoder ($(FUZZ_TIME) each; FUZZ_TIME=1h make fuzz)
	@$(MAKE) fuzz-short FUZZ_SHORT=$(FUZZ_TIME)
