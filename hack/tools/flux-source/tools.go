//go:build tools

// Package tools pins Flux's source-controller built by `hack/tools/build.sh source-controller`.
package tools

import _ "github.com/fluxcd/source-controller"
