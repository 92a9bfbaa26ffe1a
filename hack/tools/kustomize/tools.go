//go:build tools

// Package tools pins the kustomize command built by `make tools`: Argo CD's
// repo-server shells out to it to render Kustomize sources.
package tools

import _ "sigs.k8s.io/kustomize/kustomize/v5"
