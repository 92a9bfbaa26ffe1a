//go:build unix

package cluster

import (
	"os/exec"
	"syscall"
)

// killGroup starts cmd in a process group of its own and kills the whole group when
// its context ends: a plugin's children (a shell's sleep, a CLI's helpers) go too.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
