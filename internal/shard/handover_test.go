package shard

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

// countReleases is a slog handler that counts "shard released" records.
type countReleases struct {
	slog.Handler
	n *atomic.Int64
}

func (c countReleases) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "shard released to its preferred replica" {
		c.n.Add(1)
	}
	return nil
}
func (c countReleases) Enabled(context.Context, slog.Level) bool { return true }
func (c countReleases) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c countReleases) WithGroup(string) slog.Handler            { return c }

// A replica that holds shards when their preferred replica joins releases each of them
// once: it does not take a shard back from the Lease it has just freed before the
// preferred replica's next try (its hold-off), which used to repeat the hand-over (and
// start and stop the shard's clusters) many times a second.
func TestASecondReplicaJoiningTakesItsShardsInOneHandOverEach(t *testing.T) {
	const shards = 8
	client := fake.NewClientset()
	var released atomic.Int64
	start := func(ctx context.Context, id string, log *slog.Logger) (*Manager, chan error) {
		m, err := New(Options{Client: client, Namespace: "fleet", Shards: shards, Identity: id, Address: id + ":1",
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond, Logger: log})
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		return m, done
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	first, firstDone := start(ctx, "r-1", slog.New(countReleases{Handler: slog.DiscardHandler, n: &released}))
	waitFor(t, "r-1 to hold every shard", func() error {
		if n := len(first.held.list()); n != shards {
			return fmt.Errorf("%d held", n)
		}
		return nil
	})
	second, secondDone := start(ctx, "r-2", quiet)
	preferred := 0
	for _, p := range Assign([]string{"r-1", "r-2"}, shards).Preferred {
		if p == "r-2" {
			preferred++
		}
	}
	require.Positive(t, preferred, "r-2 is preferred for some shard")
	waitFor(t, "each shard held by its preferred replica", func() error {
		return heldByPreferred(client, shards, []string{"r-1", "r-2"})
	})
	time.Sleep(2 * time.Second) // two Lease durations more: a take-back would show
	require.NoError(t, heldByPreferred(client, shards, []string{"r-1", "r-2"}))
	require.Equal(t, int64(preferred), released.Load(), "one hand-over per shard r-2 is preferred for")
	require.Len(t, second.held.list(), preferred)
	cancel()
	require.NoError(t, <-firstDone)
	require.NoError(t, <-secondDone)
}

// seeMembers is nil once every manager of ms sees n live members.
func seeMembers(ms []*Manager, n int) error {
	for _, m := range ms {
		if v := m.view(time.Now()); len(v.ids) != n {
			return fmt.Errorf("%s sees %v", m.Identity(), v.ids)
		}
	}
	return nil
}

// heldByPreferred checks that every shard Lease is held by its preferred member.
func heldByPreferred(client kubernetes.Interface, shards int, members []string) error {
	a := Assign(members, shards)
	for i := range shards {
		l, err := client.CoordinationV1().Leases("fleet").Get(context.Background(), fmt.Sprintf("%s-shard-%d", DefaultFleet, i), metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := a.Preferred[i]
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != want {
			return fmt.Errorf("shard %d held by %v, preferred %s", i, l.Spec.HolderIdentity, want)
		}
	}
	return nil
}

// recorder is a slog handler that keeps the message of every record, for a test to
// look for one.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	return nil
}
func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }

// logged reports how many records' messages start with prefix.
func (r *recorder) logged(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.msgs {
		if strings.HasPrefix(m, prefix) {
			n++
		}
	}
	return n
}

// gauges returns m's fleet metrics (gathered through a pedantic registry, which checks
// them against their descriptions) by name.
func gauges(m *Manager) (map[string]float64, error) {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(m.Collector()); err != nil {
		return nil, err
	}
	mfs, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if ms := mf.GetMetric(); len(ms) == 1 {
			out[mf.GetName()] = ms[0].GetGauge().GetValue()
		}
	}
	return out, nil
}

// holds is nil once m holds n shards and its gauge name reads v.
func holds(m *Manager, n int, name string, v float64) error {
	g, err := gauges(m)
	switch {
	case err != nil:
		return err
	case len(m.held.list()) != n:
		return fmt.Errorf("%s holds %v, want %d shards", m.Identity(), m.held.list(), n)
	case g[name] != v:
		return fmt.Errorf("%s: %s is %v, want %v", m.Identity(), name, g[name], v)
	}
	return nil
}

func waitFor(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A replica's first hand-over has settled (what the start-up readiness gate waits for)
// once it holds exactly the shards it is the preferred replica of: a lone replica with
// every shard, a joining one with its share, taken over from the first.
func TestAReplicaIsSettledOnceItHoldsExactlyItsPreferredShards(t *testing.T) {
	const shards = 8
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := func(id string) (*Manager, chan error) {
		m, err := New(Options{Client: client, Namespace: "fleet", Shards: shards, Identity: id, Address: id + ":1",
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		require.False(t, m.Settled(), "not settled before it watches the fleet")
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		return m, done
	}
	settled := func(m *Manager) func() error {
		return func() error {
			if !m.Settled() {
				return fmt.Errorf("%s not settled, holds %v", m.Identity(), m.held.list())
			}
			return nil
		}
	}
	first, firstDone := start("r-1")
	waitFor(t, "r-1 settled", settled(first))
	require.Len(t, first.held.list(), shards, "a lone replica settles holding every shard")

	second, secondDone := start("r-2")
	waitFor(t, "r-2 settled", settled(second))
	preferred := 0
	for i := range shards {
		if Assign([]string{"r-1", "r-2"}, shards).Preferred[i] == "r-2" {
			preferred++
			require.True(t, second.held.has(i), "r-2 settled holding shard %d, which it is preferred for", i)
		}
	}
	require.Len(t, second.held.list(), preferred, "and no other")
	waitFor(t, "r-1 settled again, with the rest", settled(first))
	cancel()
	require.NoError(t, <-firstDone)
	require.NoError(t, <-secondDone)
}

// A member that is gone again at once moves no shard: a member joining shifts shards
// between the others too (Assign balances the loads), so a holder releases a shard to
// its preferred replica only once every live member has been seen for two retry periods.
func TestAMemberGoneAgainAtOnceMovesNoShard(t *testing.T) {
	const shards = 8
	stable, blip := []string{"r-1", "r-2"}, []string{"r-1", "r-2", "r-3"}
	before, during := Assign(stable, shards), Assign(blip, shards)
	shifted := 0
	for i := range shards {
		if during.Preferred[i] != "r-3" && during.Preferred[i] != before.Preferred[i] {
			shifted++
		}
	}
	require.Positive(t, shifted, "r-3 joining shifts a shard between r-1 and r-2")
	client := fake.NewClientset()
	var released atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var done []chan error
	var managers []*Manager
	for _, id := range stable {
		m, err := New(Options{Client: client, Namespace: "fleet", Shards: shards, Identity: id, Address: id + ":1",
			LeaseDuration: 8 * time.Second, RenewDeadline: 4 * time.Second, RetryPeriod: 2 * time.Second,
			Logger: slog.New(countReleases{Handler: slog.DiscardHandler, n: &released})})
		require.NoError(t, err)
		managers = append(managers, m)
		done = append(done, make(chan error, 1))
		go func(ch chan error) { ch <- m.Run(ctx) }(done[len(done)-1])
	}
	waitFor(t, "each shard held by its preferred replica", func() error { return heldByPreferred(client, shards, stable) })
	settledAt := released.Load()

	leases := client.CoordinationV1().Leases("fleet")
	now, secs, holder := metav1.NewMicroTime(time.Now()), int32(8), "r-3"
	member := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: DefaultFleet + "-member-r-3",
		Labels: map[string]string{LabelFleet: DefaultFleet, LabelRole: roleMember}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &now}}
	_, err := leases.Create(ctx, member, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(t, "both replicas to see r-3", func() error { return seeMembers(managers, len(blip)) })
	require.NoError(t, leases.Delete(ctx, member.Name, metav1.DeleteOptions{}))
	waitFor(t, "both replicas to see r-3 gone", func() error { return seeMembers(managers, len(stable)) })
	time.Sleep(5 * time.Second) // past two retry periods: a release for the blip would show
	require.NoError(t, heldByPreferred(client, shards, stable))
	require.Equal(t, settledAt, released.Load(), "no shard released for a member gone again at once")
	cancel()
	for _, ch := range done {
		require.NoError(t, <-ch)
	}
}

// A member back after its Lease expired (a crashed container restarting in its pod,
// whose name is the identity) counts as new for the release gate: the others release it no
// shard until it has been seen again for two retry periods, so a replica that crashes
// at once again moves no shard. It was taken as seen since its first life, and every
// shard it is preferred for was released to it on its first renewal.
func TestAMemberBackAfterItsLeaseExpiredMovesNoShardAtOnce(t *testing.T) {
	const shards = 8
	stable := []string{"r-1", "r-2"}
	require.Contains(t, Assign(append(stable, "r-3"), shards).Preferred, "r-3", "r-3 is preferred for some shard")
	client := fake.NewClientset()
	var released atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var done []chan error
	var managers []*Manager
	for _, id := range stable {
		m, err := New(Options{Client: client, Namespace: "fleet", Shards: shards, Identity: id, Address: id + ":1",
			LeaseDuration: 8 * time.Second, RenewDeadline: 4 * time.Second, RetryPeriod: 2 * time.Second,
			Logger: slog.New(countReleases{Handler: slog.DiscardHandler, n: &released})})
		require.NoError(t, err)
		managers = append(managers, m)
		done = append(done, make(chan error, 1))
		go func(ch chan error) { ch <- m.Run(ctx) }(done[len(done)-1])
	}
	waitFor(t, "each shard held by its preferred replica", func() error { return heldByPreferred(client, shards, stable) })
	settledAt := released.Load()

	leases := client.CoordinationV1().Leases("fleet")
	now, secs, holder := metav1.NewMicroTime(time.Now()), int32(1), "r-3"
	member := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: DefaultFleet + "-member-r-3",
		Labels: map[string]string{LabelFleet: DefaultFleet, LabelRole: roleMember}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &now}}
	member, err := leases.Create(ctx, member, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(t, "both replicas to see r-3", func() error { return seeMembers(managers, 3) })
	waitFor(t, "both replicas to see r-3's Lease expire", func() error { return seeMembers(managers, len(stable)) })
	time.Sleep(5 * time.Second) // past two retry periods since r-3 was first seen
	require.Equal(t, settledAt, released.Load(), "no shard released for r-3's first, short life")

	back := metav1.NewMicroTime(time.Now())
	member.Spec.RenewTime = &back // r-3 restarted: it renews its Lease again, once
	_, err = leases.Update(ctx, member, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitFor(t, "both replicas to see r-3 back", func() error { return seeMembers(managers, 3) })
	waitFor(t, "both replicas to see r-3 gone again", func() error { return seeMembers(managers, len(stable)) })
	time.Sleep(2 * time.Second) // one retry period: a release on r-3's return would show
	require.Equal(t, settledAt, released.Load(), "no shard released to a member back for a moment")
	cancel()
	for _, ch := range done {
		require.NoError(t, <-ch)
	}
}
