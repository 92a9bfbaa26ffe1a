package faults_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/configmap-attacher/configmap-attacher/eventsource"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// TestReplayFloodNoWrites: an event-source restart replays every ADD. 500 ReplicaSets are
// attached first (through the EventBus); then 10,000 ADD events (each of the 500 replayed
// 20 times, each with its own message id, so JetStream de-duplicates none) are published
// as fast as 8 publishers can. Checked: 10,000 messages acked; zero writes to ConfigMaps
// at the apiserver (PATCH, PUT, DELETE); work in flight (unacked, sampled from JetStream
// every 100 ms) at most 4 × --eventbus-max-in-flight 16 = 64 (the pull batch and the
// handlers bound it; the consumer's window, MaxAckPending, is larger: it also holds the
// messages Nak'd with a delay, docs/design.md "EventBus isolation") and goroutines bounded; the serve process's resident memory is recorded
// before, at its peak during, and after the flood, and its growth bounded.
func TestReplayFloodNoWrites(t *testing.T) {
	const n, rounds, inFlight = 500, 20, 16
	b := newBus(t)
	w := newWorkload(t, "flood", n)
	api := newAPIRequests(t)
	svc := startService(t, b, "--log-level", "warn", "--eventbus-max-in-flight", fmt.Sprint(inFlight))
	w.createSets(t)

	require.NoError(t, <-publishPaced(b, w, 0))
	controlplane.Eventually(t, 120*time.Second, "the 500 ReplicaSets attached and the stream acked", func() error {
		if _, err := w.attached(context.Background()); err != nil {
			return err
		}
		return b.idle()
	})
	acks0, err := svc.metric("configmap_attacher_eventbus_messages_total", map[string]string{"result": "ack"})
	require.NoError(t, err)
	writes := func() map[string]int {
		out := map[string]int{}
		for _, verb := range []string{"PATCH", "PUT", "DELETE", "POST"} {
			out[verb] = api.count(t, verb, "configmaps", "")
		}
		out["GET replicasets"] = api.count(t, "GET", "replicasets", "")
		return out
	}
	before := writes()
	rss0, hwm0 := svc.rss()

	// Sample in-flight work, goroutines and memory while the flood is handled.
	var mu sync.Mutex
	var maxAckPending, maxGoroutines int
	var maxRSS int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			info, err := b.consumer(context.Background())
			g, gerr := svc.metric("go_goroutines", nil)
			rss, _ := svc.rss()
			mu.Lock()
			if err == nil {
				maxAckPending = max(maxAckPending, info.NumAckPending)
			}
			if gerr == nil {
				maxGoroutines = max(maxGoroutines, int(g))
			}
			maxRSS = max(maxRSS, rss)
			mu.Unlock()
		}
	}()

	start := time.Now()
	pub := &eventsource.Publisher{JS: b.js, EventSourceName: "replicasets", EventName: "replicaset-add"}
	g, ctx := errgroup.WithContext(context.Background())
	for p := range 8 {
		g.Go(func() error {
			for r := range rounds {
				for i := p; i < n; i += 8 {
					if err := pub.Publish(ctx, "ADD", w.sets[i]); err != nil {
						return fmt.Errorf("round %d: %w", r, err)
					}
				}
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
	published := time.Since(start)
	controlplane.Eventually(t, 300*time.Second, "the flood to be handled", func() error {
		acks, err := svc.metric("configmap_attacher_eventbus_messages_total", map[string]string{"result": "ack"})
		if err != nil {
			return err
		}
		if got := int(acks - acks0); got < n*rounds {
			return fmt.Errorf("%d of %d acked", got, n*rounds)
		}
		return b.idle()
	})
	handled := time.Since(start)
	close(stop)
	<-sampled
	after := writes()
	rss1, hwm1 := svc.rss()
	acks, err := svc.metric("configmap_attacher_eventbus_messages_total", map[string]string{"result": "ack"})
	require.NoError(t, err)
	naks, err := svc.metric("configmap_attacher_eventbus_messages_total", map[string]string{"result": "nak"})
	require.NoError(t, err)

	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	mu.Lock()
	defer mu.Unlock()
	t.Logf("flood: %d events for %d attached ReplicaSets, published in %s, all handled in %s; acked %d, nak %d",
		n*rounds, n, published.Round(time.Millisecond), handled.Round(time.Millisecond), int(acks-acks0), int(naks))
	t.Logf("apiserver requests during the flood: PATCH %d, PUT %d, DELETE %d, POST %d configmaps; GET %d replicasets",
		after["PATCH"]-before["PATCH"], after["PUT"]-before["PUT"], after["DELETE"]-before["DELETE"], after["POST"]-before["POST"],
		after["GET replicasets"]-before["GET replicasets"])
	t.Logf("in flight: max %d unacked (bound %d); max %d goroutines; serve RSS before %s (peak so far %s), max sampled during %s, after %s (peak %s)",
		maxAckPending, 4*inFlight, maxGoroutines, mib(rss0), mib(hwm0), mib(maxRSS), mib(rss1), mib(hwm1))

	assert.Equal(t, n*rounds, int(acks-acks0), "every replayed event acked")
	for _, verb := range []string{"PATCH", "PUT", "DELETE", "POST"} {
		assert.Equal(t, before[verb], after[verb], "no %s of a ConfigMap during the replay", verb)
	}
	assert.LessOrEqual(t, maxAckPending, 4*inFlight, "in-flight messages bounded by the pull batch and the handlers")
	assert.Less(t, maxGoroutines, 500, "goroutines bounded")
	assert.Less(t, hwm1-hwm0, int64(128<<20), "peak memory grew by less than 128 MiB during 10,000 events")
}
