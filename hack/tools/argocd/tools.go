//go:build tools

// Package tools pins the Argo CD multicall binary built by `make tools` (the
// application controller and the repo-server, picked by ARGOCD_BINARY_NAME).
package tools

import _ "github.com/argoproj/argo-cd/v3/cmd"
