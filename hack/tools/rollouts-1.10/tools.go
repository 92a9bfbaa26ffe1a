//go:build tools

// Package tools pins the Argo Rollouts v1.10 controller, the second Rollouts version the
// acceptance scenarios run on (CONFIGMAP_ATTACHER_ROLLOUTS=v1.10).
package tools

import (
	_ "github.com/argoproj/argo-rollouts/cmd/rollouts-controller"
)
