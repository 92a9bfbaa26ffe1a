package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/freeport"
)

// service is `configmap-attacher serve` running as its own process.
type service struct {
	cmd       *exec.Cmd
	done      chan struct{}
	err       error
	grpcAddr  string
	httpAddr  string
	logFile   string
	startedAt time.Time
	// readyAt is when /readyz first answered 200.
	readyAt time.Time
}

// startAttempts bounds the starts of one service: a port free when picked may be taken
// by another process (a service starting beside it) before serve binds it.
const startAttempts = 3

// errAddrInUse is serve exiting because an address it was to listen on was taken.
var errAddrInUse = errors.New("address already in use")

// startService runs serve with the control plane's kubeconfig, free loopback ports and
// extra flags, and returns once /readyz answers 200. When serve finds its gRPC or HTTP
// port taken it starts again on new ones, up to startAttempts times; a port of extra's
// taken is an error wrapping errAddrInUse (the caller picks it).
func (e *env) startService(ctx context.Context, name string, extra ...string) (*service, error) {
	var err error
	for try := 1; try <= startAttempts; try++ {
		logName := name
		if try > 1 {
			logName = fmt.Sprintf("%s-try%d", name, try)
		}
		var s *service
		if s, err = e.launch(ctx, logName, extra); err == nil {
			return s, nil
		}
		if !errors.Is(err, errOwnPortTaken) {
			return nil, err
		}
		if try < startAttempts {
			e.cfg.Logf("   serve %s: its gRPC or HTTP port was taken (start %d of %d); picking others", name, try, startAttempts)
		}
	}
	return nil, err
}

// errOwnPortTaken is serve exiting because the gRPC or HTTP port startService picked
// was taken.
var errOwnPortTaken = fmt.Errorf("the service's own port: %w", errAddrInUse)

// launch starts serve once, on newly picked gRPC and HTTP ports, and waits until ready.
func (e *env) launch(ctx context.Context, name string, extra []string) (*service, error) {
	ports, err := freeport.NOn("127.0.0.1", 2)
	if err != nil {
		return nil, err
	}
	s := &service{grpcAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]), httpAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		logFile: filepath.Join(e.logDir, "serve-"+name+".log"), done: make(chan struct{})}
	args := append([]string{"serve", "--kubeconfig", e.cp.Kubeconfig(), "--cluster-name", "in-cluster",
		"--grpc-addr", s.grpcAddr, "--http-addr", s.httpAddr, "--metrics-addr", "127.0.0.1:0", "--log-level", "warn",
		"--kube-api-qps", strconv.FormatFloat(float64(e.cfg.QPS), 'f', -1, 32), "--kube-api-burst", strconv.Itoa(e.cfg.Burst)}, extra...)
	log, err := os.Create(s.logFile)
	if err != nil {
		return nil, fmt.Errorf("service log: %w", err)
	}
	s.cmd = exec.Command(e.cfg.Binary, args...)
	if e.cfg.GoMemLimit != "" {
		s.cmd.Env = append(os.Environ(), "GOMEMLIMIT="+e.cfg.GoMemLimit) // as the chart sets it from the memory limit
	}
	s.cmd.Stdout, s.cmd.Stderr = log, log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	s.startedAt = time.Now()
	if err := s.cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("starting serve: %w", err)
	}
	go func() {
		s.err = s.cmd.Wait()
		_ = log.Close()
		close(s.done)
	}()
	return s, s.waitReady(ctx)
}

// waitReady waits until /readyz answers 200, up to 3 minutes; it stops serve when it
// gives up. Serve exiting on a taken port is an error wrapping errAddrInUse, and
// errOwnPortTaken when the port was its gRPC or HTTP one.
func (s *service) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.httpAddr+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				s.readyAt = time.Now()
				return nil
			}
		}
		select {
		case <-s.done:
			return s.exited()
		case <-ctx.Done():
			s.stop()
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return fmt.Errorf("serve not ready after 3m\n%s", tail(s.logFile, 20))
		}
	}
}

// exited is the error of serve exiting before it was ready.
func (s *service) exited() error {
	b, _ := os.ReadFile(s.logFile)
	err := fmt.Errorf("serve exited before ready: %v\n%s", s.err, tail(s.logFile, 20))
	switch {
	case portTaken(string(b), s.grpcAddr, s.httpAddr):
		return fmt.Errorf("%w: %w", errOwnPortTaken, err)
	case strings.Contains(string(b), errAddrInUse.Error()):
		return fmt.Errorf("%w: %w", errAddrInUse, err)
	}
	return err
}

// portTaken reports whether log says one of addrs could not be bound as taken.
func portTaken(log string, addrs ...string) bool {
	for _, a := range addrs {
		if strings.Contains(log, a+": bind: "+errAddrInUse.Error()) {
			return true
		}
	}
	return false
}

// startupDone is the line serve logs (at info) once its caches are in sync and every
// watcher has handled its start-up replay (internal/server, releaseAfterReplay).
const startupDone = "start-up done"

// waitLog waits until the service's log has a line containing text, up to timeout.
func (s *service) waitLog(ctx context.Context, text string, timeout time.Duration) bool {
	return s.waitLogCount(ctx, text, 1, timeout)
}

// waitLogCount waits until the service's log has n lines containing text, up to timeout.
func (s *service) waitLogCount(ctx context.Context, text string, n int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if b, err := os.ReadFile(s.logFile); err == nil && strings.Count(string(b), text) >= n {
			return true
		}
		select {
		case <-s.done:
			return false
		case <-time.After(200 * time.Millisecond):
		}
	}
	return false
}

// rss returns VmRSS and VmHWM in bytes.
func (s *service) rss() (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, 0, fmt.Errorf("reading serve's RSS: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			hwm = kb << 10
		}
	}
	if rss == 0 {
		return 0, 0, errors.New("no VmRSS in /proc status")
	}
	return rss, hwm, nil
}

// stop sends SIGTERM and waits (SIGKILL after 20s).
func (s *service) stop() {
	if s == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
