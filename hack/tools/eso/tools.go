//go:build tools

// Package tools pins the External Secrets Operator controller built by hack/tools/build.sh.
package tools

import (
	_ "github.com/external-secrets/external-secrets"
)
