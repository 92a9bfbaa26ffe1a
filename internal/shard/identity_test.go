package shard

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const waitingGauge = "configmap_attacher_fleet_identity_waiting"

// Two replicas given one identity (a fixed --fleet-identity in the values, a StatefulSet
// pod briefly running twice, two hostNetwork pods on one node without POD_NAME) never
// hold a shard together: the Leases fence by holder identity, and each would take the
// other's renewals for its own. So each process writes its instance token on the member
// Lease: one started while another renews that Lease waits, holding nothing and saying
// so (configmap_attacher_fleet_identity_waiting), and of two that claim it at once the
// younger gives way; the one waiting takes over when the other leaves, or once the
// other's Lease expires.
func TestTwoReplicasWithOneIdentityNeverHoldAShardTogether(t *testing.T) {
	const shards = 4
	tests := []struct {
		name string
		// together: both claim the identity before either's first renewal lands
		together bool
		// killed: the first stops without deleting its member Lease, which expires
		killed bool
	}{
		{name: "the second started while the first runs waits, and takes over when the first leaves"},
		{name: "the second started while the first runs waits, and takes over once the first's Lease expires", killed: true},
		{name: "of two started at once the younger gives way, and takes over when the older leaves", together: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			if tt.together {
				holdMemberWrites(client, 2)
			}
			var ms [2]*Manager
			var logs [2]*recorder
			for k, addr := range []string{"10.0.0.1:1", "10.0.0.2:1"} {
				logs[k] = &recorder{}
				o := fleetOptions(client, "r-1", shards, slog.New(logs[k]))
				o.Address = addr
				// a retry period long enough that the younger of two started at once sees the
				// older's renewal before its view settles, even on a loaded machine
				o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 3*time.Second, 2*time.Second, 500*time.Millisecond
				m, err := New(o)
				require.NoError(t, err)
				ms[k] = m
			}
			older, younger := ms[0], ms[1]
			require.Less(t, older.instance, younger.instance, "the token of the one made first sorts first")
			both := overlaps(ms[:], shards)
			var cancels [2]context.CancelFunc
			var done [2]chan error
			run := func(k int) {
				ctx, cancel := context.WithCancel(context.Background())
				cancels[k], done[k] = cancel, make(chan error, 1)
				go func() { done[k] <- ms[k].Run(ctx) }()
			}
			defer func() {
				for k := range ms {
					if cancels[k] != nil {
						cancels[k]()
						require.NoError(t, <-done[k])
					}
				}
			}()

			run(0)
			if !tt.together {
				waitFor(t, "the first to hold every shard", func() error { return holds(older, shards, waitingGauge, 0) })
			}
			run(1)
			waitFor(t, "the older to hold every shard", func() error { return holds(older, shards, waitingGauge, 0) })
			waitFor(t, "the younger to wait, holding none", func() error { return holds(younger, 0, waitingGauge, 1) })
			time.Sleep(2 * time.Second) // four retry periods: a claim or a shard taken would show
			require.NoError(t, holds(older, shards, waitingGauge, 0))
			require.NoError(t, holds(younger, 0, waitingGauge, 1))
			require.False(t, younger.Settled(), "a replica waiting for its identity is not settled")
			require.Contains(t, younger.Summary(), "another instance renews member Lease configmap-attacher-member-r-1")
			if tt.together {
				require.Equal(t, 1, logs[1].logged("an older instance renews this replica's member Lease too"), "the younger gave way")
			} else {
				require.Equal(t, 1, logs[1].logged("another instance renews this replica's member Lease"), "logged once")
			}
			require.Zero(t, logs[0].logged("an older instance")+logs[0].logged("another instance"), "the older never waited")

			if tt.killed {
				keepMemberLease(client)
			}
			cancels[0]()
			require.NoError(t, <-done[0])
			cancels[0] = nil
			waitFor(t, "the younger to hold every shard", func() error { return holds(younger, shards, waitingGauge, 0) })
			require.Empty(t, both(), "shards held by both instances at once")
		})
	}
}

// overlaps samples, every millisecond until the test ends, the shards ms hold; the
// function it returns lists those held by two at once.
func overlaps(ms []*Manager, shards int) func() []int {
	var mu sync.Mutex
	seen := map[int]bool{}
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			for i := range shards {
				n := 0
				for _, m := range ms {
					if m.held.has(i) {
						n++
					}
				}
				if n > 1 {
					mu.Lock()
					seen[i] = true
					mu.Unlock()
				}
			}
		}
	}()
	return func() []int {
		close(stop)
		mu.Lock()
		defer mu.Unlock()
		var out []int
		for i := range seen {
			out = append(out, i)
		}
		return out
	}
}

// holdMemberWrites refuses every write of a member Lease until n instances have tried
// one, so that n instances started at once all claim their identity before any of them
// sees another's renewal. (Reactors run one at a time, under the fake's lock.)
func holdMemberWrites(client *fake.Clientset, n int) {
	tried := map[string]bool{}
	client.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l, ok := written(a)
		if !ok || l.Labels[LabelRole] != roleMember || len(tried) >= n {
			return false, nil, nil
		}
		tried[l.Annotations[AnnotationInstance]] = true
		return true, nil, fmt.Errorf("held until %d instances tried: %w", n, errPartitioned)
	})
}

// keepMemberLease refuses from now on every delete of a Lease, as if the replica
// stopping had been killed after it stopped its clusters: its member Lease expires.
func keepMemberLease(client *fake.Clientset) {
	client.PrependReactor("delete", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errPartitioned
	})
}

// written returns the Lease a create or update action writes.
func written(a k8stesting.Action) (*coordinationv1.Lease, bool) {
	var obj runtime.Object
	switch a := a.(type) {
	case k8stesting.CreateAction:
		obj = a.GetObject()
	case k8stesting.UpdateAction:
		obj = a.GetObject()
	default:
		return nil, false
	}
	l, ok := obj.(*coordinationv1.Lease)
	return l, ok
}

// A replica waiting for its identity deletes nothing when it stops: the member Lease it
// would delete on leaving is the other instance's, which goes on renewing it.
func TestAReplicaWaitingForItsIdentityLeavesTheOthersMemberLease(t *testing.T) {
	const shards = 4
	client := fake.NewClientset()
	var ms [2]*Manager
	for k, addr := range []string{"10.0.0.1:1", "10.0.0.2:1"} {
		o := fleetOptions(client, "r-1", shards, slog.New(slog.DiscardHandler))
		o.Address = addr
		m, err := New(o)
		require.NoError(t, err)
		ms[k] = m
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ms[0].Run(ctx) }()
	waitFor(t, "the first to hold every shard", func() error { return holds(ms[0], shards, waitingGauge, 0) })
	ctx1, cancel1 := context.WithCancel(context.Background())
	done1 := make(chan error, 1)
	go func() { done1 <- ms[1].Run(ctx1) }()
	waitFor(t, "the second to wait", func() error { return holds(ms[1], 0, waitingGauge, 1) })
	cancel1()
	require.NoError(t, <-done1)
	for _, a := range client.Actions() {
		require.False(t, a.Matches("delete", "leases"), "deleted %v", a)
	}
	require.NoError(t, holds(ms[0], shards, waitingGauge, 0))
	cancel()
	require.NoError(t, <-done)
}
