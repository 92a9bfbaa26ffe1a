#!/usr/bin/env bash
# Builds the pinned real components into ./bin: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, the Argo Events binary, the Argo Rollouts
# controller and its kubectl plugin, kwok, and for Argo CD: the argocd binary (application
# controller and repo-server), a Redis server, helm and kustomize, Prometheus' promtool and
# dashboard-lint (hack/tools/dashboard-lint) for the chart's alerts and dashboard. A binary already built
# at the pinned version (recorded in bin/.<name>.version) is skipped. Usage: build.sh [NAME...]
# Argo CD v3.6 declares go 1.27: its module alone is built with ARGOCD_GOTOOLCHAIN
# (default go1.27.3, which the go command fetches from the module proxy).
# external-secrets (the External Secrets Operator, a neighbour test's controller) is built
# only when named: `build.sh external-secrets`.
# rollouts-controller-1.10 (Argo Rollouts v1.10, make test-rollouts-1.10) is built only when
# named; it also declares a newer Go (ROLLOUTS_1_10_GOTOOLCHAIN, default go1.27.3).
# source-controller and kustomize-controller (Flux, make test-flux) are built only when named.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/bin"
mkdir -p "$bin"
export GOFLAGS="${GOFLAGS:-} -mod=mod"
export CGO_ENABLED=0
argocd_toolchain=${ARGOCD_GOTOOLCHAIN:-go1.27.3}
# Argo Rollouts v1.10 declares go 1.26.10: its module alone is built with this toolchain.
rollouts_1_10_toolchain=${ROLLOUTS_1_10_GOTOOLCHAIN:-go1.27.3}

# version_of MODULE_DIR MODULE: the version that folder's go.mod pins.
version_of() { (cd "$1" && go list -m -f '{{.Version}}' "$2"); }

# build NAME MODULE_DIR PACKAGE VERSION LDFLAGS [TAGS]
build() {
  local name=$1 dir=$2 pkg=$3 version=$4 ldflags=$5 tags=${6:-}
  local stamp="$bin/.$name.version"
  if [[ -x "$bin/$name" && -f "$stamp" && "$(cat "$stamp")" == "$version" ]]; then
    echo "tools: $name $version is up to date"
    return
  fi
  echo "tools: building $name $version (first build can take several minutes)..."
  local start=$SECONDS
  (cd "$dir" && go build -trimpath ${tags:+-tags "$tags"} -ldflags "$ldflags" -o "$bin/$name.tmp" "$pkg")
  mv "$bin/$name.tmp" "$bin/$name"
  echo "$version" > "$stamp"
  echo "tools: built $name $version in $((SECONDS - start))s"
}

kube_ldflags() {
  local v=$1 major minor
  major=$(echo "${v#v}" | cut -d. -f1); minor=$(echo "${v#v}" | cut -d. -f2)
  local p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    printf -- '-X %s.gitVersion=%s -X %s.gitMajor=%s -X %s.gitMinor=%s -X %s.gitTreeState=clean -X %s.buildDate=1970-01-01T00:00:00Z ' \
      "$p" "$v" "$p" "$major" "$p" "$minor" "$p" "$p"
  done
  printf -- '-s -w'
}

want=("$@")
[[ ${#want[@]} -eq 0 ]] && want=(etcd kube-apiserver kube-controller-manager kube-scheduler argo-events \
  rollouts-controller kubectl-argo-rollouts kwok argocd redis helm kustomize promtool dashboard-lint)
for name in "${want[@]}"; do
  case "$name" in
    etcd)
      v=$(version_of "$root/hack/tools/etcd" go.etcd.io/etcd/server/v3)
      build etcd "$root/hack/tools/etcd" . "$v" "-s -w" ;;
    kube-apiserver|kube-controller-manager|kube-scheduler)
      v=$(version_of "$root/hack/tools/kube" k8s.io/kubernetes)
      build "$name" "$root/hack/tools/kube" "k8s.io/kubernetes/cmd/$name" "$v" "$(kube_ldflags "$v")" ;;
    argo-events)
      v=$(version_of "$root/hack/tools/argo" github.com/argoproj/argo-events)
      build argo-events "$root/hack/tools/argo" github.com/argoproj/argo-events/cmd "$v" \
        "-s -w -X github.com/argoproj/argo-events.version=$v" ;;
    rollouts-controller|kubectl-argo-rollouts)
      v=$(version_of "$root/hack/tools/rollouts" github.com/argoproj/argo-rollouts)
      build "$name" "$root/hack/tools/rollouts" "github.com/argoproj/argo-rollouts/cmd/$name" "$v" \
        "-s -w -X github.com/argoproj/argo-rollouts/utils/version.version=$v -X github.com/argoproj/argo-rollouts/utils/version.buildDate=1970-01-01T00:00:00Z" ;;
    rollouts-controller-1.10)
      # The second Rollouts version (make test-rollouts-1.10); its stamp is its own.
      export GOTOOLCHAIN=$rollouts_1_10_toolchain
      v=$(version_of "$root/hack/tools/rollouts-1.10" github.com/argoproj/argo-rollouts)
      build "$name" "$root/hack/tools/rollouts-1.10" github.com/argoproj/argo-rollouts/cmd/rollouts-controller "$v" \
        "-s -w -X github.com/argoproj/argo-rollouts/utils/version.version=$v -X github.com/argoproj/argo-rollouts/utils/version.buildDate=1970-01-01T00:00:00Z"
      unset GOTOOLCHAIN ;;
    kwok)
      v=$(version_of "$root/hack/tools/kwok" sigs.k8s.io/kwok)
      build kwok "$root/hack/tools/kwok" sigs.k8s.io/kwok/cmd/kwok "$v" "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${v#v}" ;;
    argocd)
      export GOTOOLCHAIN=$argocd_toolchain
      v=$(version_of "$root/hack/tools/argocd" github.com/argoproj/argo-cd/v3)
      build argocd "$root/hack/tools/argocd" github.com/argoproj/argo-cd/v3/cmd "$v" \
        "-s -w -X github.com/argoproj/argo-cd/v3/common.version=${v#v} -X github.com/argoproj/argo-cd/v3/common.buildDate=1970-01-01T00:00:00Z -X github.com/argoproj/argo-cd/v3/common.gitTreeState=clean"
      unset GOTOOLCHAIN ;;
    redis)
      v=$(version_of "$root/hack/tools/redis" github.com/alicebob/miniredis/v2)
      build redis "$root/hack/tools/redis" . "$v" "-s -w" ;;
    helm)
      v=$(version_of "$root/hack/tools/helm" helm.sh/helm/v3)
      build helm "$root/hack/tools/helm" helm.sh/helm/v3/cmd/helm "$v" \
        "-s -w -X helm.sh/helm/v3/internal/version.version=$v -X helm.sh/helm/v3/internal/version.gitTreeState=clean" ;;
    kustomize)
      v=$(version_of "$root/hack/tools/kustomize" sigs.k8s.io/kustomize/kustomize/v5)
      build kustomize "$root/hack/tools/kustomize" sigs.k8s.io/kustomize/kustomize/v5 "$v" \
        "-s -w -X sigs.k8s.io/kustomize/api/provenance.version=kustomize/$v -X sigs.k8s.io/kustomize/api/provenance.buildDate=1970-01-01T00:00:00Z" ;;
    promtool)
      # remove_all_sd: Prometheus' own build tag leaving out the cloud service discoveries
      # (AWS, Azure, GCE, ...), which rule tests never use and which were most of the build.
      v=$(version_of "$root/hack/tools/promtool" github.com/prometheus/prometheus)
      build promtool "$root/hack/tools/promtool" github.com/prometheus/prometheus/cmd/promtool "$v-remove_all_sd" \
        "-s -w -X github.com/prometheus/common/version.Version=$v -X github.com/prometheus/common/version.BuildDate=19700101-00:00:00" remove_all_sd ;;
    dashboard-lint)
      v=src-$(cat "$root"/hack/tools/dashboard-lint/*.go "$root/hack/tools/dashboard-lint/go.mod" | sha256sum | cut -c1-12)
      build dashboard-lint "$root/hack/tools/dashboard-lint" . "$v" "-s -w" ;;
    external-secrets|eso)
      v=$(version_of "$root/hack/tools/eso" github.com/external-secrets/external-secrets)
      build external-secrets "$root/hack/tools/eso" github.com/external-secrets/external-secrets "$v" "-s -w" ;;
    source-controller)
      v=$(version_of "$root/hack/tools/flux-source" github.com/fluxcd/source-controller)
      build source-controller "$root/hack/tools/flux-source" github.com/fluxcd/source-controller "$v" "-s -w" ;;
    kustomize-controller)
      v=$(version_of "$root/hack/tools/flux-kustomize" github.com/fluxcd/kustomize-controller)
      build kustomize-controller "$root/hack/tools/flux-kustomize" github.com/fluxcd/kustomize-controller "$v" "-s -w" ;;
    *) echo "tools: unknown tool $name" >&2; exit 2 ;;
  esac
done
# The CRD manifests the local control plane installs come from these pinned modules.
(cd "$root/hack/tools/crds" && go mod download github.com/argoproj/argo-rollouts github.com/argoproj/argo-events github.com/argoproj/argo-cd/v3 \
  github.com/cert-manager/cert-manager github.com/prometheus-operator/prometheus-operator)
