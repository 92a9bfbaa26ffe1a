package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestPortsAreDistinctFreeAndBelowTheEphemeralRange(t *testing.T) {
	ports, err := NOn("127.0.0.1", 6)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d picked twice: %v", p, ports)
		}
		seen[p] = true
		if p >= ephemeralLow() {
			t.Errorf("port %d is in the ephemeral range (from %d)", p, ephemeralLow())
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d is not free after NOn returned: %v", p, err)
		}
		l.Close()
	}
}
