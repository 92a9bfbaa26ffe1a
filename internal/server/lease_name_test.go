package server_test

import (
	"fmt"
	"hash/fnv"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
)

// TestLeaseNameIsAValidObjectName: every cluster name the registry accepts (any non-empty name
// of at most 253 characters without whitespace) gives a valid Lease name, and the
// default cluster keeps the one-cluster Lease.
func TestLeaseNameIsAValidObjectName(t *testing.T) {
	long := ""
	for len(long) < 253 {
		long += "x"
	}
	for _, name := range []string{"b", "prod.eu-1", "Member_B", "https://10.0.0.1:6443", "in-cluster", "ÄÖÜ", long, "a..b", "-x-", "x_y"} {
		n := server.LeaseName(name, false)
		assert.Empty(t, validation.IsDNS1123Subdomain(n), "LeaseName(%q) = %q", name, n)
		assert.NotEqual(t, gc.DefaultLeaseName, n, "a member never shares the default cluster's Lease")
	}
	assert.Equal(t, gc.DefaultLeaseName, server.LeaseName("anything", true))
}

// TestLeaseNamesOfTwoClustersDiffer: two different cluster names never share a Lease (else
// the sweepers of two clusters elect one leader between them, and one cluster's periodic
// sweep never runs while the other's leader holds it). A cluster named like the hash
// form of another cluster's name collides.
func TestLeaseNamesOfTwoClustersDiffer(t *testing.T) {
	invalid := "Prod"
	h := fnv.New64a()
	_, _ = h.Write([]byte(invalid))
	for _, crafted := range []string{fmt.Sprintf("%016x", h.Sum64()), fmt.Sprintf("h%016x", h.Sum64())} {
		assert.NotEqual(t, server.LeaseName(invalid, false), server.LeaseName(crafted, false),
			"clusters %q and %q share Lease %s", invalid, crafted, server.LeaseName(invalid, false))
	}
}
