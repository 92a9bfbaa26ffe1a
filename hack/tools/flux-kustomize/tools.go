//go:build tools

// Package tools pins Flux's kustomize-controller built by `hack/tools/build.sh kustomize-controller`.
package tools

import _ "github.com/fluxcd/kustomize-controller"
