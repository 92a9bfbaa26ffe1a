package shard

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
