package testfix

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// CutProxy is a TCP proxy on loopback to one address that a test can cut: while cut,
// it closes every open connection and refuses new ones at once, as a network partition
// between one client and a server does (other clients of the server are not affected).
type CutProxy struct {
	target string
	ln     net.Listener

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]bool
}

// NewCutProxy listens on a free loopback port and forwards to target until the test
// ends.
func NewCutProxy(t testing.TB, target string) *CutProxy {
	t.Helper()
	p := &CutProxy{target: target, conns: map[net.Conn]bool{}}
	p.ln = serveLoopback(t, "cut proxy", p.forward)
	t.Cleanup(func() { _ = p.ln.Close(); p.Cut() })
	return p
}

// Addr is the proxy's host:port.
func (p *CutProxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every open connection and refuses new ones until Heal.
func (p *CutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// Heal lets connections through again.
func (p *CutProxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// serveLoopback listens on a free loopback port and hands every connection to handle
// (each in a goroutine of its own) until the listener is closed.
func serveLoopback(t testing.TB, what string, handle func(net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				continue
			}
			go handle(c)
		}
	}()
	return ln
}

func (p *CutProxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	if !p.track(c, up) {
		_ = c.Close()
		_ = up.Close()
		return
	}
	go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
	_, _ = io.Copy(c, up)
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// track registers both ends unless the proxy is cut.
func (p *CutProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	for _, c := range conns {
		p.conns[c] = true
	}
	return true
}
