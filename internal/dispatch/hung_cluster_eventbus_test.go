package dispatch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// EventBus messages of a hung cluster beyond its share are answered busy at once
// (Nak, redelivered later) instead of waiting for the cluster's slot: a waiting
// message holds one of the subscriber's handlers, which the other clusters need.
func TestHungClusterEventBusMessagesDoNotWaitForItsSlots(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	kc := fake.NewClientset()
	healthy, err := core.NewAttacher(core.Config{Cluster: "healthy", Client: kc, Reader: core.LiveReader{Client: kc}, Logger: testfix.Quiet()})
	require.NoError(t, err)
	d, err := dispatch.New(dispatch.Config{Clusters: clusterMap{"hung": hungAttacher(t, "hung", release, entered), "healthy": healthy},
		MaxInFlight: 4, MaxInFlightPerCluster: 2, Logger: testfix.Quiet()})
	require.NoError(t, err)
	ctx := context.Background()
	answers := make(chan dispatch.Class, 5)
	var sent sync.WaitGroup
	defer sent.Wait()
	defer close(release)
	for range 5 {
		sent.Add(1)
		go func() {
			defer sent.Done()
			answers <- d.Dispatch(ctx, dispatch.Request{Path: dispatch.PathEventBus, Event: core.Event{Cluster: "hung", Namespace: "shop", Name: "web-1"}}).Class
		}()
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the hung cluster's reads did not arrive")
	}
	for range 3 {
		select {
		case c := <-answers:
			assert.Equal(t, dispatch.ClassBusy, c, "beyond the hung cluster's share")
		case <-time.After(10 * time.Second):
			t.Fatal("a message beyond the hung cluster's share waits (and holds a subscriber handler)")
		}
	}
	a := d.Dispatch(ctx, dispatch.Request{Path: dispatch.PathEventBus, Event: core.Event{Cluster: "healthy", Namespace: "shop", Name: "web-1"}})
	assert.NotEqual(t, dispatch.ClassBusy, a.Class, "the healthy cluster gets a slot: %v", a.Err)
}
