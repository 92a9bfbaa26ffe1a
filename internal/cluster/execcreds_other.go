//go:build !unix

package cluster

import "os/exec"

// killGroup: without process groups, the plugin itself is killed (exec.CommandContext).
func killGroup(*exec.Cmd) {}
