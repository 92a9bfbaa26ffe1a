// Package harnessproc starts the upstream programs of the development harness (the local
// control plane's etcd, kube-apiserver and controllers; Argo CD, External Secrets, Flux)
// as local processes, each in its own process group and logging to a file, so that
// nothing outlives a run.
package harnessproc

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Process is one started binary, logging to <dir>/<name>.log.
type Process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// Start runs bin with args and env (KEY=VALUE, added to this process's environment) in
// its own process group, killed if the test process dies, so nothing outlives a run.
func Start(dir, name, bin string, args, env []string) (*Process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr, cmd.Dir = logFile, logFile, dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited returns an error once the process has ended, with the log's tail.
func (p *Process) Exited() error {
	if ended, err := p.Ended(); ended {
		return fmt.Errorf("%s exited: %v\n%s", p.name, err, p.Tail(20))
	}
	return nil
}

// Ended reports whether the process has ended and, if so, how (what exec.Cmd.Wait
// returned: nil for exit status 0).
func (p *Process) Ended() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Args are the arguments the process was started with (for a restart).
func (p *Process) Args() []string { return append([]string(nil), p.cmd.Args[1:]...) }

// Stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *Process) Stop(grace time.Duration) {
	if ended, _ := p.Ended(); ended {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Tail is the last n lines of the process's log.
func (p *Process) Tail(n int) string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Listening reports whether something accepts TCP connections on addr.
func Listening(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// Name is the name the process was started under.
func (p *Process) Name() string { return p.name }

// LogPath is the file the process logs to.
func (p *Process) LogPath() string { return p.log }
