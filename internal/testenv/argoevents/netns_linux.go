//go:build linux

package argoevents

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// isolationSupported reports whether processes can be started in their own network
// namespace (Linux; needs CAP_SYS_ADMIN, i.e. root).
const isolationSupported = true

// startIsolated starts cmd in a new network namespace whose loopback interface is up, and
// makes each of ports reachable inside it at 127.0.0.1:PORT by proxying to the same port on
// the host's loopback.
//
// Every Argo Events process binds its metrics server on a fixed :7777, so two of them
// cannot share a network namespace. This does what `unshare -n` plus a unix-socket bridge
// would, without external tools: a goroutine locked to its OS thread unshares that thread's
// network namespace, brings lo up, opens the bridge listeners (a socket belongs to the
// namespace it was created in) and forks the child (which inherits the thread's
// namespace). It then switches the thread back to the original namespace and unlocks it.
// The bridge's accept loops and dials run in the host namespace.
//
// The thread must survive: a child started with Pdeathsig (here, and the local control
// plane's processes) is killed when the thread that forked it exits, and the Go runtime
// ends a thread whose goroutine exits while locked. If the switch back fails, the
// goroutine parks forever instead of exiting, so the thread is never reused or ended.
func startIsolated(cmd *exec.Cmd, ports []int) (*bridge, error) {
	type result struct {
		listeners []net.Listener
		err       error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("open the current network namespace: %w", err)}
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("unshare network namespace (needs root/CAP_SYS_ADMIN): %w", err)}
			return
		}
		lns, err := setUpAndStart(cmd, ports)
		if rerr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); rerr != nil {
			// The thread is stuck in the new namespace: never let it run anything else, and
			// never let it end (see above).
			done <- result{listeners: lns, err: err}
			select {}
		}
		runtime.UnlockOSThread()
		done <- result{listeners: lns, err: err}
	}()
	r := <-done
	if r.err != nil {
		for _, ln := range r.listeners {
			_ = ln.Close()
		}
		return nil, r.err
	}
	b := &bridge{conns: map[net.Conn]struct{}{}}
	for i, ln := range r.listeners {
		b.listeners = append(b.listeners, ln)
		b.wg.Add(1)
		go b.serve(ln, net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i])))
	}
	return b, nil
}

// setUpAndStart runs on the thread that is in the new namespace: lo up, one listener per
// port, then the child.
func setUpAndStart(cmd *exec.Cmd, ports []int) ([]net.Listener, error) {
	if err := loopbackUp(); err != nil {
		return nil, err
	}
	var lns []net.Listener
	for _, p := range ports {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			return lns, fmt.Errorf("bridge listen on port %d in the namespace: %w", p, err)
		}
		lns = append(lns, ln)
	}
	if err := cmd.Start(); err != nil {
		return lns, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	return lns, nil
}

// loopbackUp sets the IFF_UP flag on lo in the calling thread's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket for lo: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("ifreq lo: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("set lo up: %w", err)
	}
	return nil
}

// bridge proxies TCP connections accepted inside a namespace to the host loopback.
type bridge struct {
	listeners []net.Listener
	wg        sync.WaitGroup
	mu        sync.Mutex
	conns     map[net.Conn]struct{}
	closed    bool
}

func (b *bridge) serve(ln net.Listener, target string) {
	defer b.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		b.wg.Add(1)
		go b.proxy(c, target)
	}
}

func (b *bridge) track(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.conns[c] = struct{}{}
	return true
}

func (b *bridge) untrack(c net.Conn) {
	b.mu.Lock()
	delete(b.conns, c)
	b.mu.Unlock()
	_ = c.Close()
}

func (b *bridge) proxy(in net.Conn, target string) {
	defer b.wg.Done()
	if !b.track(in) {
		_ = in.Close()
		return
	}
	defer b.untrack(in)
	out, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	if !b.track(out) {
		_ = out.Close()
		return
	}
	defer b.untrack(out)
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	go pipe(out, in)
	go pipe(in, out)
	wg.Wait()
}

// Close stops accepting, closes every proxied connection and waits for the goroutines.
func (b *bridge) Close() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	b.closed = true
	var errs []error
	for _, ln := range b.listeners {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for c := range b.conns {
		_ = c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
	return errors.Join(errs...)
}
