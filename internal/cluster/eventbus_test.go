package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/eventsource"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/natsserver"
)

// TestEventBusRoutesByCluster: the EventBus subscriber (package eventbus) takes the
// registry unchanged; events published by each member's EventSource (metadata.cluster)
// land in their own cluster, and an unknown cluster is terminated without any change.
func TestEventBusRoutesByCluster(t *testing.T) {
	requireClusters(t)
	ctx := context.Background()
	specs, err := KubeconfigSpecs(mergedKubeconfig(t), []string{"a", "b"}, false, 0, 0)
	require.NoError(t, err)
	reg, err := New(Options{Clusters: specs, Logger: testLogger(t), ProbeInterval: 200 * time.Millisecond})
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = reg.Run(rctx) }()

	ns, err := natsserver.Start(ctx, natsserver.Options{Token: "s3cret"})
	require.NoError(t, err)
	defer ns.Stop()
	nc, err := ns.Connect()
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "default", Subjects: []string{"default.>"}, Duplicates: time.Minute})
	require.NoError(t, err)

	metrics := prometheus.NewRegistry()
	d, err := dispatch.New(dispatch.Config{Clusters: reg, Logger: testLogger(t)})
	require.NoError(t, err)
	sub, err := eventbus.NewSubscriber(eventbus.SubscriberOptions{URL: ns.ClientURL(), Auth: eventbus.Auth{Token: "s3cret"},
		TLS: eventbus.TLS{CAFile: ns.CAFile()}, EventSourceName: "configmap-attacher", Logger: testLogger(t),
		Registerer: metrics, NakDelay: 200 * time.Millisecond}, d)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- sub.Run(rctx) }()
	select {
	case <-sub.Ready():
	case err := <-done:
		t.Fatalf("subscriber stopped: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("subscriber not ready")
	}

	fa := makeFixture(t, cpA, "eventbus", "web-4", "cfg-4")
	fb := makeFixture(t, cpB, "eventbus", "web-4", "cfg-4")
	publish := func(cluster string, f fixture) {
		p := &eventsource.Publisher{JS: js, EventSourceName: "configmap-attacher", EventName: "deployment-replicasets",
			Metadata: map[string]string{"cluster": cluster}}
		require.NoError(t, p.Publish(ctx, "ADD", f.rs))
	}
	counter := func(result string) float64 {
		mfs, err := metrics.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() != "configmap_attacher_eventbus_messages_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "result" && l.GetValue() == result {
						return m.GetCounter().GetValue()
					}
				}
			}
		}
		return 0
	}

	publish("b", fb)
	controlplane.Eventually(t, 30*time.Second, "b's revision attached", func() error {
		if got := fb.owners(t); len(got) != 1 || got[0] != string(fb.rs.UID) {
			return fmt.Errorf("owners %v", got)
		}
		return nil
	})
	assert.Nil(t, fa.owners(t), "a unchanged by b's event")

	publish("c", fa) // unknown cluster: Term, nothing changes anywhere
	controlplane.Eventually(t, 30*time.Second, "the unknown cluster's message terminated", func() error {
		if counter("term") < 1 {
			return fmt.Errorf("term=%v ack=%v", counter("term"), counter("ack"))
		}
		return nil
	})
	assert.Nil(t, fa.owners(t))

	publish("a", fa)
	controlplane.Eventually(t, 30*time.Second, "a's revision attached", func() error {
		if got := fa.owners(t); len(got) != 1 || got[0] != string(fa.rs.UID) {
			return fmt.Errorf("owners %v", got)
		}
		return nil
	})
	assert.Equal(t, []string{string(fb.rs.UID)}, fb.owners(t))
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Error("subscriber did not stop")
	}
}
