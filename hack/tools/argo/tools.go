//go:build tools

// Package tools pins the Argo Events command built by `make tools`.
package tools

import _ "github.com/argoproj/argo-events/cmd"
