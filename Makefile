# configmap-attacher. `make help` lists the targets.
SHELL := /usr/bin/env bash
comma := ,
GO ?= go
BIN := $(CURDIR)/bin
# The release version has one source of truth, the VERSION file: the binary, the image tag and
# the chart's version and appVersion follow it (deploy/test's TestReleaseVersionIsTheSameEverywhere).
VERSION ?= $(shell cat VERSION)
COMMIT ?= $(shell c=$$(git rev-parse --short=12 HEAD 2>/dev/null) || c=unknown; git diff --quiet HEAD 2>/dev/null || c=$$c-dirty; echo $$c)
LDFLAGS := -s -w -X github.com/configmap-attacher/configmap-attacher/internal/cli.Version=$(VERSION) -X github.com/configmap-attacher/configmap-attacher/internal/cli.Commit=$(COMMIT)
# Each test package starts its own local control plane (controlplane.TestMain); go test
# runs at most GOMAXPROCS packages at once.
TEST_FLAGS ?= -count=1 -timeout 30m
export CONFIGMAP_ATTACHER_BIN_DIR := $(BIN)

.PHONY: help build tools tools-controlplane tools-helm tools-monitoring test-monitoring test test-eso unit lint run demo clean

help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-20s %s\n", $$1, $$2}'

build: ## build bin/configmap-attacher (what ships) and bin/configmap-attacher-dev (it plus dev and demo: make run, make demo)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/configmap-attacher ./cmd/configmap-attacher
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/configmap-attacher-dev ./cmd/configmap-attacher-dev

tools: ## build every pinned real component into bin/ (first run: about 65 minutes on 2 cores, Argo CD about 10 of them; then skipped)
	@hack/tools/build.sh

tools-controlplane: ## build only what make run and make demo need: the control plane and its workloads (scheduler, kwok, Argo Rollouts)
	@hack/tools/build.sh etcd kube-apiserver kube-controller-manager kube-scheduler kwok rollouts-controller kubectl-argo-rollouts

tools-helm: ## build only bin/helm, the pinned Helm the deploy docs use (make run builds it too)
	@hack/tools/build.sh helm

tools-monitoring: ## build only bin/promtool and bin/dashboard-lint (make tools builds them too; promtool without the cloud service discoveries: about 4 min cold)
	@hack/tools/build.sh promtool dashboard-lint

test-eso: tools-controlplane ## run the External Secrets scenarios (internal/testenv/externalsecrets) on the real ESO; builds it first (long: not in make test)
	@hack/tools/build.sh external-secrets
	CONFIGMAP_ATTACHER_ESO=1 $(GO) test $(TEST_FLAGS) ./internal/testenv/externalsecrets/

test-monitoring: tools-monitoring ## only the chart's alerts under promtool test rules and its dashboard under dashboard-lint (part of make test)
	cd deploy/test && GOFLAGS=-mod=mod $(GO) test -count=1 -short -run 'TestPrometheusRuleAlerts|TestGrafanaDashboard' -v .

test: tools lint ## run every test on the real local control plane (builds the tools first)
	$(GO) test $(TEST_FLAGS) ./...
	cd deploy/test && GOFLAGS=-mod=mod $(GO) test $(TEST_FLAGS) ./...
	$(MAKE) fuzz-short

# The Argo Rollouts scenarios on the other proven Rollouts version (make test runs v1.8,
# hack/tools/rollouts; docs/reliability.md records this run). v1.10's controller needs Go
# 1.27 for its build alone (hack/tools/rollouts-1.10).
ROLLOUTS_PACKAGES ?= ./internal/e2e/acceptance/...

.PHONY: test-rollouts-1.10

test-rollouts-1.10: tools ## the Argo Rollouts acceptance scenarios on Rollouts v1.10 (make test runs them on v1.8); first build 7 min with a warm module cache, 64 min measured cold (docs/reliability.md)
	@hack/tools/build.sh rollouts-controller-1.10
	CONFIGMAP_ATTACHER_ROLLOUTS=v1.10 $(GO) test $(TEST_FLAGS) $(ROLLOUTS_PACKAGES)

unit: ## fast unit tests only (no control plane)
	$(GO) test -count=1 -short ./...
	cd deploy/test && GOFLAGS=-mod=mod $(GO) test -count=1 -short ./...

lint: ## go vet + gofmt check
	$(GO) vet ./...
	$(GO) vet -tags flux ./internal/testenv/flux/
	cd deploy/test && GOFLAGS=-mod=mod $(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

run: tools-controlplane tools-helm build ## run the service on the embedded default (local control plane + NATS; gRPC :9000, HTTP :8080, ops :8081 and the watcher); ARGS="--way-in all" passes dev flags; Ctrl-C stops
	$(BIN)/configmap-attacher-dev dev $(ARGS)

demo: tools-controlplane build ## a scripted canary on the embedded default, printed as a timeline; exit 0 only if every step held
	$(BIN)/configmap-attacher-dev demo

clean: ## remove bin/
	rm -rf $(BIN)

# --- Flux (README.md, "Flux and revisions"); not part of `make test` ---
.PHONY: test-flux

test-flux: ## the Flux proof: the real source-controller and kustomize-controller (built first: 64 + 10 min measured on a loaded machine, docs/design.md) with Argo Rollouts on the local control plane
	@hack/tools/build.sh etcd kube-apiserver kube-controller-manager kube-scheduler kwok rollouts-controller source-controller kustomize-controller
	$(GO) test -tags flux $(TEST_FLAGS) ./internal/testenv/flux/

# --- deploy (deploy/README.md) ---
IMAGE ?= configmap-attacher:$(VERSION)
DOCKER ?= docker

.PHONY: docker-build deploy-test

docker-build: ## build the container image configmap-attacher:VERSION (static binary, distroless, non-root; VERSION stamped)
	$(DOCKER) build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(IMAGE) .

# --- release (README.md, "Install") ---
# Built locally into dist/: no GoReleaser (the recipe below is all a release needs: go build,
# the pinned helm, sha256sum). Publishing (the Git tag, the release assets, the chart
# repository's index.yaml, the image) is the printed commands.
DIST := $(CURDIR)/dist
RELEASE_PLATFORMS := linux/amd64 linux/arm64
IMAGE_REPO ?= ghcr.io/configmap-attacher/configmap-attacher
CHART_REPO_URL ?= https://github.com/configmap-attacher/configmap-attacher/releases/download/v$(VERSION)

.PHONY: release

release: ## build release $(VERSION) into dist/: static linux/amd64 and arm64 binaries, the packaged chart, a Helm repository index, SHA256SUMS; prints the image build command
	@[[ "$(VERSION)" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$$ ]] || { echo "release: VERSION $(VERSION) is not a semantic version"; exit 1; }
	@[[ "$(COMMIT)" != *-dirty || -n "$(ALLOW_DIRTY)" ]] || { echo "release: the work tree has uncommitted changes (commit them, or ALLOW_DIRTY=1 for a trial build)"; exit 1; }
	@grep -qx 'version: $(VERSION)' deploy/helm/configmap-attacher/Chart.yaml && grep -qx 'appVersion: "$(VERSION)"' deploy/helm/configmap-attacher/Chart.yaml \
	  || { echo "release: deploy/helm/configmap-attacher/Chart.yaml's version and appVersion must be $(VERSION) (the VERSION file)"; exit 1; }
	@hack/tools/build.sh helm
	rm -rf $(DIST) && mkdir -p $(DIST)
	@for p in $(RELEASE_PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; \
	  echo "release: configmap-attacher $(VERSION) $$os/$$arch"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -buildvcs=false -ldflags '$(LDFLAGS)' \
	    -o $(DIST)/configmap-attacher-$(VERSION)-$$os-$$arch ./cmd/configmap-attacher || exit 1; done
	$(BIN)/helm lint --strict deploy/helm/configmap-attacher --set httpAuth.existingSecret=configmap-attacher-http-token
	$(BIN)/helm package deploy/helm/configmap-attacher -d $(DIST)
	$(BIN)/helm repo index $(DIST) --url $(CHART_REPO_URL)
	cd $(DIST) && sha256sum configmap-attacher-$(VERSION)-* configmap-attacher-$(VERSION).tgz > SHA256SUMS && cat SHA256SUMS
	@echo; echo "release $(VERSION) (commit $(COMMIT)) is in dist/. The image (this machine runs no Docker engine):"
	@echo "  docker buildx build --platform $(subst $(eval) ,$(comma),$(RELEASE_PLATFORMS)) --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(IMAGE_REPO):$(VERSION) --push ."
	@echo "Then: git tag v$(VERSION); upload dist/* as the release v$(VERSION)'s assets; publish dist/index.yaml (merged: helm repo index --merge) as the chart repository's index."

deploy-test: tools ## the deploy proof: chart/kustomize render, server-side dry run, the service under the shipped RBAC
	cd deploy/test && GOFLAGS=-mod=mod $(GO) test $(TEST_FLAGS) ./...

# --- benchmarks (bench/README.md); not part of `make test` ---
.PHONY: bench

bench: tools build ## run the benchmarks on the local control plane; one table, JSON in bench/results/ (BENCH_QUICK=1: small sizes)
	$(GO) run ./bench/cmd/bench -binary $(BIN)/configmap-attacher -results bench/results $(BENCH_FLAGS)

# --- fuzzing (docs/reliability.md) ---
# package:target pairs; -short keeps each package's TestMain from starting a control plane.
FUZZ_TARGETS := ./internal/event:FuzzDecode ./trigger:FuzzParseSpec ./trigger:FuzzHTTPEvent ./internal/ingress/eventbus:FuzzMessage ./internal/cluster:FuzzSpecFromSecret
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
