package eventbus_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/natsserver"
)

type noClusters struct{}

func (noClusters) Attacher(string) (*core.Attacher, error) { return nil, errors.New("no clusters") }

// When the durable consumer is deleted (the EventBus stream re-created by its
// controller, an operator's `nats consumer rm`), the subscriber re-creates it (the
// watchdog's Info says "consumer not found"), starting just before the last message it
// received, so a message published after the deletion is still handled. (Found by this
// test: it used to be taken for a disconnection and nothing was consumed again.)
func TestConsumerDeletedRecovers(t *testing.T) {
	ctx := context.Background()
	ns, err := natsserver.Start(ctx, natsserver.Options{Token: "s3cret"})
	require.NoError(t, err)
	t.Cleanup(ns.Stop)
	nc, err := ns.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "default", Subjects: []string{"default.>"}})
	require.NoError(t, err)

	var seen atomic.Int64
	s, err := eventbus.NewSubscriber(eventbus.SubscriberOptions{URL: ns.ClientURL(), Auth: eventbus.Auth{Token: "s3cret"},
		TLS: eventbus.TLS{CAFile: ns.CAFile()}, Logger: quiet, Registerer: prometheus.NewRegistry(),
		StallTimeout: 2 * time.Second}, observed{over(t, noClusters{}), func(dispatch.Answer) { seen.Add(1) }})
	require.NoError(t, err)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	select {
	case <-s.Ready():
	case err := <-done:
		t.Fatalf("Run ended: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("not ready")
	}
	require.NoError(t, js.DeleteConsumer(ctx, "default", eventbus.DefaultDurable))

	time.Sleep(time.Second)
	_, err = js.Publish(ctx, "default.replicasets.add", []byte("not json"))
	require.NoError(t, err)
	deadline := time.Now().Add(20 * time.Second)
	for seen.Load() == 0 && time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("Run returned %v with its context live after the consumer was deleted", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	ok, detail := s.Health()
	if seen.Load() == 0 {
		t.Fatalf("a message published after the consumer was deleted was never handled in 20 s (StallTimeout 2 s); Health=%v %q", ok, detail)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

// A stop while the EventBus is down (server shut down under a running subscriber, with
// a watchdog ticking fast) returns: no wait on an ack or a pull that can never answer.
func TestStopWhileEventBusDownIsPrompt(t *testing.T) {
	ctx := context.Background()
	ns, err := natsserver.Start(ctx, natsserver.Options{Token: "s3cret"})
	require.NoError(t, err)
	t.Cleanup(ns.Stop)
	nc, err := ns.Connect()
	require.NoError(t, err)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "default", Subjects: []string{"default.>"}})
	require.NoError(t, err)
	for range 20 {
		_, err = js.Publish(ctx, "default.replicasets.add", []byte("not json"))
		require.NoError(t, err)
	}
	nc.Close()
	s, err := eventbus.NewSubscriber(eventbus.SubscriberOptions{URL: ns.ClientURL(), Auth: eventbus.Auth{Token: "s3cret"},
		TLS: eventbus.TLS{CAFile: ns.CAFile()}, Logger: quiet, Registerer: prometheus.NewRegistry(), DeliverAll: true,
		StallTimeout: 200 * time.Millisecond}, over(t, noClusters{}))
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	select {
	case <-s.Ready():
	case err := <-done:
		t.Fatalf("Run ended: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("not ready")
	}
	ns.Shutdown()
	time.Sleep(time.Second)
	ok, _ := s.Health()
	require.False(t, ok, "Health reports the EventBus down")
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return after cancel with the EventBus down")
	}
}
