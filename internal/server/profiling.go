package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// profiling serves the Go runtime's profiles (net/http/pprof under /debug/pprof/) on
// a listener of its own, never on the receiver's: the receiver faces untrusted
// callers, and a profile shows the heap and costs CPU. Options.ProfilingAddr must be a
// loopback address (reach it with kubectl port-forward).
type profiling struct {
	lis net.Listener
	srv *http.Server
}

// ValidProfilingAddr checks that addr ("host:port") is on a loopback host.
func ValidProfilingAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("profiling address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("profiling address %q: the host must be loopback (127.0.0.1, ::1 or localhost); use kubectl port-forward to reach it", addr)
	}
	return nil
}

func newProfiling(addr string) (*profiling, error) {
	if err := ValidProfilingAddr(addr); err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("profiling listen on %s: %w", addr, err)
	}
	if ta, ok := lis.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
		_ = lis.Close() // "localhost" resolved elsewhere (a hosts file, DNS)
		return nil, fmt.Errorf("profiling address %q: bound %s, not a loopback address", addr, lis.Addr())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return &profiling{lis: lis, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}, nil
}

// Run serves until ctx ends.
func (p *profiling) Run(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		_ = p.srv.Close()
	}()
	if err := p.srv.Serve(p.lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("profiling: %w", err)
	}
	return nil
}

// Addr is the listener's address.
func (p *profiling) Addr() net.Addr { return p.lis.Addr() }
