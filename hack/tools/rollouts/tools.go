//go:build tools

// Package tools pins the Argo Rollouts commands built by `make tools`.
package tools

import (
	_ "github.com/argoproj/argo-rollouts/cmd/kubectl-argo-rollouts"
	_ "github.com/argoproj/argo-rollouts/cmd/rollouts-controller"
)
