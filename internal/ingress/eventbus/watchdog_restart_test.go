package eventbus_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// slowCluster delays every routing by d (a slow apiserver), so that the pull sits idle
// while messages are pending and the watchdog restarts it while messages flow.
type slowCluster struct {
	a *core.Attacher
	d time.Duration
}

func (c slowCluster) Attacher(string) (*core.Attacher, error) { time.Sleep(c.d); return c.a, nil }

// Watchdog restarts while messages flow (consumer pauses mid-flow, a tiny StallTimeout, a short AckWait so that
// messages discarded with a stopped iterator come back): every ReplicaSet is attached,
// each exactly once (the sum of writes equals the ReplicaSets: a redelivery writes
// nothing), the consumer ends idle and Run returns after cancel.
func TestWatchdogRestartsWhileFlowingWriteOnce(t *testing.T) {
	f := newFixture(t, fmt.Sprintf("eventbus-watchdog-restarts-%d", time.Now().UnixNano()%1e6))
	logs := &testfix.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var writes, handled atomic.Int64
	d := observed{over(t, slowCluster{a: f.att, d: 100 * time.Millisecond}), func(a dispatch.Answer) {
		handled.Add(1)
		writes.Add(int64(a.Response.Writes()))
	}}
	s := f.subscriberTo(d, prometheus.NewRegistry(), func(o *eventbus.SubscriberOptions) {
		o.StallTimeout, o.AckWait, o.MaxInFlight, o.Logger, o.DeliverAll = 40*time.Millisecond, 2*time.Second, 4, log, true
	})
	stop := f.start(s)
	const n = 40
	sets := f.workload(n, n)
	ctx := context.Background()
	for _, rs := range sets {
		require.NoError(t, f.pub.Publish(ctx, "ADD", rs))
	}
	// Pauses stop deliveries while messages are in flight and buffered: the watchdog
	// re-creates the pull mid-flow.
	for range 3 {
		time.Sleep(150 * time.Millisecond)
		_, err := f.js.PauseConsumer(ctx, "default", eventbus.DefaultDurable, time.Now().Add(400*time.Millisecond))
		require.NoError(t, err)
		time.Sleep(400 * time.Millisecond)
	}
	controlplane.Eventually(t, 90*time.Second, "every ReplicaSet attached", func() error { return f.allAttached(sets, n) })
	controlplane.Eventually(t, 60*time.Second, "the consumer idle", f.consumerIdle)
	done := make(chan error, 1)
	go func() { done <- stop() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	restarts := strings.Count(logs.String(), "re-creating it")
	require.NotZero(t, restarts, "the watchdog never restarted the pull; the test proves nothing")
	t.Logf("handled=%d writes=%d restarts=%d", handled.Load(), writes.Load(), restarts)
	require.EqualValues(t, n, writes.Load(), "each ReplicaSet written exactly once across restarts and redeliveries")
}
