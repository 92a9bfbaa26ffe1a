//go:build tools

// Package tools pins the helm command built by `make tools`: Argo CD's repo-server
// shells out to it to render Helm sources.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
