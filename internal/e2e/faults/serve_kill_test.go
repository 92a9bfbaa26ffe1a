package faults_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/eventsource"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// publishPaced publishes an ADD for every ReplicaSet of w, one every gap, and reports
// the first error on the returned channel once done.
func publishPaced(b *bus, w *workload, gap time.Duration) <-chan error {
	done := make(chan error, 1)
	pub := &eventsource.Publisher{JS: b.js, EventSourceName: "replicasets", EventName: "replicaset-add"}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, rs := range w.sets {
			if err := pub.Publish(ctx, "ADD", rs); err != nil {
				done <- err
				return
			}
			time.Sleep(gap)
		}
		done <- nil
	}()
	return done
}

// TestServeKilledMidStream: `serve` (the real process) is SIGKILLed while a stream of 500
// ReplicaSet ADDs flows through the EventBus, and restarted while the rest is still being
// published. Every ReplicaSet ends up attached and no ConfigMap is written twice: each of
// the 500 ConfigMaps' owners changed exactly once (watch) and the apiserver saw exactly
// 500 PATCHes of ConfigMaps in all (a redelivered message for an object already attached
// makes no request). The messages the killed process had taken but not acked are
// redelivered after the consumer's AckWait (30 s, the service's default).
func TestServeKilledMidStream(t *testing.T) {
	const n = 500
	b := newBus(t)
	w := newWorkload(t, "kill-serve", n)
	owners := watchOwners(t, w.kc, w.ns)
	api := newAPIRequests(t)
	patches0 := api.count(t, "PATCH", "configmaps", "")
	svc := startService(t, b, "--log-level", "warn")
	w.createSets(t)

	started := time.Now()
	published := publishPaced(b, w, 8*time.Millisecond)
	controlplane.Eventually(t, 60*time.Second, "serve to be mid-stream", func() error {
		if _, _, total := owners.summary(); total < n/4 {
			return fmt.Errorf("%d attached", total)
		}
		return nil
	})
	svc.kill()
	_, _, atKill := owners.summary()
	info, err := b.consumer(context.Background())
	require.NoError(t, err)
	t.Logf("SIGKILLed serve after %d of %d attached (%s); consumer: %d delivered, %d unacked, %d not yet delivered",
		atKill, n, time.Since(started).Round(time.Millisecond), info.Delivered.Consumer, info.NumAckPending, info.NumPending)
	require.Less(t, atKill, n, "the kill landed mid-stream")

	startService(t, b, "--log-level", "warn")
	require.NoError(t, <-published)
	controlplane.Eventually(t, 120*time.Second, "every ReplicaSet attached and the stream acked", func() error {
		if _, err := w.attached(context.Background()); err != nil {
			return err
		}
		return b.idle()
	})
	controlplane.Eventually(t, 30*time.Second, "the watch to see every write", func() error {
		if once, _, _ := owners.summary(); once < n {
			return fmt.Errorf("%d seen", once)
		}
		return nil
	})
	once, twice, total := owners.summary()
	patches := api.count(t, "PATCH", "configmaps", "") - patches0
	t.Logf("after restart: %d/%d attached, %d ConfigMaps written once, %d twice, %d owner changes, %d PATCHes (%s in all)",
		n, n, once, twice, total, patches, time.Since(started).Round(time.Second))
	assert.Equal(t, n, once, "every ConfigMap written exactly once")
	assert.Zero(t, twice, "none written twice: %v", owners.twiceWritten())
	assert.Equal(t, n, patches, "exactly one PATCH per ConfigMap reached the apiserver")
	assert.Zero(t, owners.deletions(), "nothing deleted")
}
