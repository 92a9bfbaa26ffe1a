// Manifest-only pin: the local control plane installs the CRDs shipped inside these
// exact module versions (read from the module cache at run time, never copied into
// this repository). Nothing here is compiled; do not run `go mod tidy` in this folder.
module github.com/configmap-attacher/configmap-attacher/hack/tools/crds

go 1.26

require (
	github.com/argoproj/argo-cd/v3 v3.5.7
	github.com/argoproj/argo-events v1.9.11
	github.com/argoproj/argo-rollouts v1.8.3
	github.com/cert-manager/cert-manager v1.18.2
	github.com/prometheus-operator/prometheus-operator v0.85.0
)
