package shard

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// How a member Lease is judged, update by update: an update that renews nothing leaves
// an expired Lease expired (and its member gone), and a renewal of an expired Lease
// starts the member's time seen anew (the release gate's two retry periods), while a
// renewal of a fresh one keeps it.
func TestAMemberLeaseIsFreshOnlyWhenRenewedAndSeenAnewAfterItExpired(t *testing.T) {
	m, err := New(Options{Client: fake.NewClientset(), Namespace: "fleet", Identity: "r-1", Address: "r-1:1"})
	require.NoError(t, err)
	holder, secs := "r-2", int32(10)
	name := DefaultFleet + "-member-r-2"
	lease := func(renew time.Time, note string) *coordinationv1.Lease {
		rt := metav1.NewMicroTime(renew)
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{AnnotationShards: note}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &rt}}
	}
	t0 := time.Now()
	m.observe(lease(t0, ""))
	first := m.leases[name].first
	age := func(d time.Duration) { // as if this replica had seen the Lease d earlier
		l := m.leases[name]
		l.changed, l.first = l.changed.Add(-d), l.first.Add(-d)
		m.leases[name] = l
		first = first.Add(-d)
	}

	age(time.Second)
	m.observe(lease(t0.Add(time.Second), ""))
	assert.True(t, m.leases[name].fresh(time.Now()), "a fresh Lease renewed stays fresh")
	assert.Equal(t, first, m.leases[name].first, "and its member keeps its time seen")

	age(time.Minute)
	require.False(t, m.leases[name].fresh(time.Now()), "not renewed for a minute: expired")
	m.observe(lease(t0.Add(time.Second), "1,2"))
	assert.False(t, m.leases[name].fresh(time.Now()), "an update renewing nothing leaves it expired")
	assert.Equal(t, first, m.leases[name].first)

	m.observe(lease(time.Now(), "1,2"))
	assert.True(t, m.leases[name].fresh(time.Now()), "renewed: fresh again")
	assert.True(t, m.leases[name].first.After(first), "and its member is seen anew, from the renewal")
}
