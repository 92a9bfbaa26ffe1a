# configmap-attacher. `make help` lists the targets.
SHELL := /usr/bin/env bash
GO ?= go
BIN := $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/configmap-attacher/configmap-attacher/internal/cli.Version=$(VERSION)
# Packages' tests share one local control plane each; -p 1 keeps two of them from
# competing for the machine's two cores.
TEST_FLAGS ?= -count=1 -timeout 30m
export CONFIGMAP_ATTACHER_BIN_DIR := $(BIN)

.PHONY: help build tools test unit lint run demo clean

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## build bin/configmap-attacher
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/configmap-attacher ./cmd/configmap-attacher

tools: ## build the pinned etcd, kube-apiserver, kube-controller-manager and argo-events into bin/ (first run: minutes)
	@hack/tools/build.sh

test: tools lint ## run every test on the real local control plane (builds the tools first)
	$(GO) test $(TEST_FLAGS) ./...
	cd deploy/test && GOFLAGS=-mod=mod $(GO) test $(TEST_FLAGS) ./...

unit: ## fast unit tests only (no control plane)
	$(GO) test -count=1 -short ./...
	cd deploy/test && GOFLAGS=-mod=mod $(GO) test -count=1 -short ./...

lint: ## go vet + gofmt check
	$(GO) vet ./...
	cd deploy/test && GOFLAGS=-mod=mod $(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

run: tools build ## run the service on the embedded default (a local control plane), Ctrl-C to stop
	$(BIN)/configmap-attacher dev

clean: ## remove bin/
	rm -rf $(BIN)

# --- deploy (deploy/README.md) ---
IMAGE ?= configmap-attacher:$(VERSION)
DOCKER ?= docker

.PHONY: docker-build deploy-test

docker-build: ## build the container image $(IMAGE) (static binary, distroless, non-root; VERSION stamped)
	$(DOCKER) build --build-arg VERSION=$(VERSION) -t $(IMAGE) .

deploy-test: tools ## the deploy proof: chart/kustomize render, server-side dry run, the service under the shipped RBAC
	cd deploy/test && GOFLAGS=-mod=mod $(GO) test $(TEST_FLAGS) ./...
