package server

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Breaker s6: the profiling address check under the other spellings of a host. What it
// accepts listens on a loopback address only; zones, the unspecified address, mapped
// non-loopback addresses, short IPv4 forms and other hostnames are refused.
func TestProfilingListensOnLoopbackOnlyWhateverTheSpelling(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"[::ffff:127.0.0.1]:0", true}, // IPv4-mapped loopback: Go listens on 127.0.0.1
		{"127.0.0.2:0", true},
		{"[::ffff:10.1.2.3]:6060", false},
		{"[::]:6060", false},
		{"[::1%lo]:6060", false},
		{"[fe80::1%lo]:6060", false},
		{"127.1:6060", false},
		{"0:6060", false},
		{"localhost.:6060", false},
		{"127.0.0.1.nip.io:6060", false},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			p, err := newProfiling(tc.addr)
			if !tc.ok {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			defer func() { _ = p.lis.Close() }()
			assert.True(t, p.Addr().(*net.TCPAddr).IP.IsLoopback(), "listening on %s", p.Addr())
		})
	}
}
