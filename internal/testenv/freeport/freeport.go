// Package freeport picks TCP ports for the local processes the project starts (the
// control plane, NATS, Argo CD) on loopback.
//
// A port is picked at random below the kernel's ephemeral range. A port the kernel
// hands out for ":0" is one it may soon give an outgoing connection of another process
// too (seen as "bind: address already in use" when the port's user starts, or restarts
// on the same port); one below that range it never hands out on its own.
package freeport

import (
	"fmt"
	mathrand "math/rand/v2"
	"net"
	"os"
	"strconv"
)

// On returns a TCP port on host that was free a moment ago.
func On(host string) (int, error) {
	ports, err := NOn(host, 1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// NOn returns n different TCP ports on host that were free a moment ago (each listener
// is held until all are picked).
func NOn(host string, n int) ([]int, error) {
	lo := ephemeralLow()
	out := make([]int, 0, n)
	for len(out) < n {
		l, err := listenBelow(host, lo)
		if err != nil {
			return nil, err
		}
		defer l.Close()
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// listenBelow listens on a random port of host below lo, or on one the kernel picks when
// 200 tries find none.
func listenBelow(host string, lo int) (net.Listener, error) {
	for range 200 {
		port := lo - 1 - mathrand.IntN(lo/2)
		if l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port))); err == nil {
			return l, nil
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("freeport: %w", err)
	}
	return l, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's default when it
// cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		var lo, hi int
		if _, err := fmt.Sscan(string(b), &lo, &hi); err == nil && lo > 2048 {
			return lo
		}
	}
	return 32768
}
