//go:build !linux

package argoevents

import (
	"errors"
	"os/exec"
)

const isolationSupported = false

func startIsolated(*exec.Cmd, []int) (*bridge, error) {
	return nil, errors.New("network namespaces need Linux")
}

type bridge struct{}

func (b *bridge) Close() error { return nil }
