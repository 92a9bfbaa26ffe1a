package testfix

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// HangProxy is a TCP proxy on loopback to one address that a test can hang: while hung
// it accepts connections and reads what they send but forwards and answers nothing (no
// reset, no close), as an apiserver that takes connections and never answers, or a
// network that swallows the packets. Other clients of the target are not affected.
type HangProxy struct {
	target string
	ln     net.Listener
	hung   atomic.Bool

	mu    sync.Mutex
	conns map[net.Conn]bool
}

// NewHangProxy listens on a free loopback port and forwards to target until the test
// ends.
func NewHangProxy(t testing.TB, target string) *HangProxy {
	t.Helper()
	p := &HangProxy{target: target, conns: map[net.Conn]bool{}}
	p.ln = serveLoopback(t, "hang proxy", p.forward)
	t.Cleanup(func() { _ = p.ln.Close(); p.closeAll() })
	return p
}

// Addr is the proxy's host:port.
func (p *HangProxy) Addr() string { return p.ln.Addr().String() }

// Hang stops forwarding: open connections and new ones are read and never answered.
func (p *HangProxy) Hang() { p.hung.Store(true) }

// Recover forwards again. The connections open while hung are closed (what they sent
// meanwhile is lost), so their clients reconnect, as after a partition.
func (p *HangProxy) Recover() {
	p.hung.Store(false)
	p.closeAll()
}

func (p *HangProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

func (p *HangProxy) forward(c net.Conn) {
	p.track(c)
	defer p.untrack(c)
	if p.hung.Load() {
		_, _ = io.Copy(io.Discard, c) // until Recover closes it
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.track(up)
	defer p.untrack(up)
	go func() { p.copy(up, c); _ = up.Close() }()
	p.copy(c, up)
	_ = c.Close()
}

// copy forwards src to dst, dropping what arrives while hung, until src ends.
func (p *HangProxy) copy(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.hung.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *HangProxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns[c] = true
}

func (p *HangProxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}
