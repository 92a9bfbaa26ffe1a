package shard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fleetTimings are short Lease timings for the fleet tests; grace is long enough that no
// shard in them is taken as anyone's (a Lease without a fresh holder for the grace): each
// one is taken as its preferred replica's or its standby's.
func fleetOptions(client *fake.Clientset, id string, shards int, log *slog.Logger) Options {
	return Options{Client: client, Namespace: "fleet", Shards: shards, Identity: id, Address: id + ":1",
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond,
		Grace: time.Hour, Logger: log}
}

// grabs counts, on every change of what a replica holds, the shards it holds that it is
// not the preferred replica of in the fleet of members.
func grabs(m **Manager, members []string, shards int, n *atomic.Int64) func(context.Context) {
	a := Assign(members, shards)
	return func(context.Context) {
		for _, i := range (*m).held.list() {
			if a.Preferred[i] != (*m).Identity() {
				n.Add(1)
			}
		}
	}
}

// Replicas started at once take no shard that they are not the preferred replica of:
// each contends only once its view of the member set has settled (every member seen for
// two retry periods), so none takes every shard while it sees no other member yet and
// hands them on after (a replica of the 1,000-cluster bench took 16 of 16 and kept what
// their clusters' start-ups cost), and a standby leaves a Lease never held, or held by a
// replica no longer a member, to the preferred replica: no shard is released or lost.
func TestReplicasStartedAtOnceTakeOnlyTheirPreferredShards(t *testing.T) {
	tests := []struct {
		name             string
		replicas, shards int
		// leftover: the shard Leases are held, not expired, by a replica of a fleet gone
		leftover bool
	}{
		{name: "2 replicas, 8 shards", replicas: 2, shards: 8},
		{name: "4 replicas, 16 shards", replicas: 4, shards: 16},
		{name: "4 replicas, 32 shards", replicas: 4, shards: 32},
		{name: "4 replicas, 16 shards, over the Leases a fleet gone left held", replicas: 4, shards: 16, leftover: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			if tt.leftover {
				leaveLeases(t, client, tt.shards, "gone-0", 5)
			}
			var ids []string
			for k := range tt.replicas {
				ids = append(ids, fmt.Sprintf("r-%d", k))
			}
			var released, grabbed atomic.Int64
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			managers := make([]*Manager, len(ids))
			done := make([]chan error, len(ids))
			for k, id := range ids {
				o := fleetOptions(client, id, tt.shards, slog.New(countReleases{Handler: slog.DiscardHandler, n: &released}))
				o.OnChange = grabs(&managers[k], ids, tt.shards, &grabbed)
				// started at once: within two retry periods of each other, even on a loaded machine
				o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 5*time.Second, 3*time.Second, 500*time.Millisecond
				m, err := New(o)
				require.NoError(t, err)
				managers[k], done[k] = m, make(chan error, 1)
			}
			for k, m := range managers {
				go func() { done[k] <- m.Run(ctx) }()
			}
			waitFor(t, "each shard held by its preferred replica", func() error { return heldByPreferred(client, tt.shards, ids) })
			for _, m := range managers {
				waitFor(t, m.Identity()+" settled", func() error {
					if !m.Settled() {
						return fmt.Errorf("holds %v", m.held.list())
					}
					return nil
				})
			}
			require.Zero(t, grabbed.Load(), "shards held by a replica not preferred for them")
			require.Zero(t, released.Load(), "shards handed over")
			cancel()
			for _, ch := range done {
				require.NoError(t, <-ch)
			}
		})
	}
}

// leaveLeases creates the shard Leases held by holder, renewed now for secs seconds.
func leaveLeases(t *testing.T, client *fake.Clientset, shards int, holder string, secs int32) {
	t.Helper()
	for i := range shards {
		now := metav1.NewMicroTime(time.Now())
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-shard-%d", DefaultFleet, i),
			Labels: map[string]string{LabelFleet: DefaultFleet, LabelRole: roleShard}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &now, AcquireTime: &now}}
		_, err := client.CoordinationV1().Leases("fleet").Create(context.Background(), l, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

// A lone replica still takes every shard: its member set (itself) settles two retry
// periods after it starts watching, and it is then every shard's preferred replica. The
// grace is an hour here, so no shard is taken as anyone's; the time it took is logged
// (about two retry periods and a Lease acquisition).
func TestALoneReplicaTakesEveryShardOnceItsViewHasSettled(t *testing.T) {
	const shards = 16
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := New(fleetOptions(client, "r-0", shards, slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- m.Run(ctx) }()
	waitFor(t, "r-0 to hold every shard", func() error { return heldByPreferred(client, shards, []string{"r-0"}) })
	t.Logf("a lone replica held all %d shards %s after its start (retry period %s)", shards, time.Since(start), m.o.RetryPeriod)
	require.Len(t, m.held.list(), shards)
	cancel()
	require.NoError(t, <-done)
}

var errPartitioned = errors.New("partitioned")

// journal is a slog handler that records which replica took which shard.
type journal struct {
	slog.Handler
	mu    *sync.Mutex
	taken *[][2]string // (identity, shard) of each "shard held" record
	attrs []slog.Attr
}

func (j journal) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "shard held: its clusters start here" {
		return nil
	}
	var id, shard string
	note := func(a slog.Attr) bool {
		switch a.Key {
		case "identity":
			id = a.Value.String()
		case "shard":
			shard = a.Value.String()
		}
		return true
	}
	for _, a := range j.attrs {
		note(a)
	}
	r.Attrs(note)
	j.mu.Lock()
	defer j.mu.Unlock()
	*j.taken = append(*j.taken, [2]string{id, shard})
	return nil
}
func (j journal) Enabled(context.Context, slog.Level) bool { return true }
func (j journal) WithAttrs(a []slog.Attr) slog.Handler {
	j.attrs = append(slices.Clone(j.attrs), a...)
	return j
}
func (j journal) WithGroup(string) slog.Handler { return j }

// killLeases makes replica id write no Lease from now on, as if it were killed: its
// member Lease and its shard Leases are no longer renewed, nor released.
func killLeases(client *fake.Clientset, id string, killed *atomic.Bool) {
	client.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if !killed.Load() {
			return false, nil, nil
		}
		l, ok := written(a)
		if !ok {
			return false, nil, nil
		}
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		if holder == id || (holder == "" && heldBy(client, l.Name, id)) {
			return true, nil, errPartitioned
		}
		return false, nil, nil
	})
}

// heldBy reports whether Lease name is stored with holder id.
func heldBy(client *fake.Clientset, name, id string) bool {
	obj, err := client.Tracker().Get(coordinationv1.SchemeGroupVersion.WithResource("leases"), "fleet", name)
	if err != nil {
		return false
	}
	l, ok := obj.(*coordinationv1.Lease)
	return ok && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == id
}

// A replica killed loses its shards to their standby replicas, which have been watching
// the Leases and take each one once it expires: not as anyone's after the grace (an hour
// here), and each in one move (no other replica takes it first).
func TestAKilledReplicasShardsGoToTheirStandbys(t *testing.T) {
	const shards = 16
	ids := []string{"r-0", "r-1", "r-2"}
	client := fake.NewClientset()
	var killed atomic.Bool
	killLeases(client, ids[0], &killed)
	var mu sync.Mutex
	var taken [][2]string
	log := slog.New(journal{Handler: slog.DiscardHandler, mu: &mu, taken: &taken})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var done []chan error
	var managers []*Manager
	for _, id := range ids {
		m, err := New(fleetOptions(client, id, shards, log))
		require.NoError(t, err)
		ch := make(chan error, 1)
		done, managers = append(done, ch), append(managers, m)
		go func() { ch <- m.Run(ctx) }()
	}
	waitFor(t, "each shard held by its preferred replica", func() error { return heldByPreferred(client, shards, ids) })
	for _, m := range managers {
		waitFor(t, m.Identity()+" settled", func() error {
			if !m.Settled() {
				return fmt.Errorf("holds %v", m.held.list())
			}
			return nil
		})
	}
	a := Assign(ids, shards)
	require.Contains(t, a.Preferred, ids[0], "r-0 holds some shard")
	mu.Lock()
	before := len(taken)
	mu.Unlock()

	killed.Store(true)
	start := time.Now()
	waitFor(t, "each shard held by its preferred replica among the living", func() error {
		return heldByPreferred(client, shards, ids[1:])
	})
	t.Logf("the killed replica's shards were taken %s after it stopped writing (lease duration %s)", time.Since(start), 2*time.Second)
	takers := func(i int) []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, e := range taken[before:] {
			if e[1] == fmt.Sprint(i) {
				out = append(out, e[0])
			}
		}
		return out
	}
	for i := range shards {
		if a.Preferred[i] != ids[0] {
			continue
		}
		// the taker logs on a goroutine of its own (OnStartedLeading), after the Lease is written
		waitFor(t, fmt.Sprintf("shard %d's taking logged", i), func() error {
			if len(takers(i)) == 0 {
				return errors.New("not yet")
			}
			return nil
		})
		require.Equal(t, []string{a.Standby[i]}, takers(i), "shard %d taken once, by its standby", i)
	}
	cancel()
	for _, ch := range done {
		require.NoError(t, <-ch)
	}
}
