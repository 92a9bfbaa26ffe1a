package dispatch_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// clusterMap is a Clusters of named Attachers.
type clusterMap map[string]*core.Attacher

func (m clusterMap) Attacher(name string) (*core.Attacher, error) {
	if a, ok := m[name]; ok {
		return a, nil
	}
	return nil, core.Invalidf("cluster", "unknown cluster %q", name)
}

// hungAttacher is an Attacher of cluster name whose every read blocks until release is
// closed. The fake clientset runs its reactors under one lock, so the first read holds
// it and the others wait on it: entered is closed at the first.
func hungAttacher(t *testing.T, name string, release <-chan struct{}, entered chan<- struct{}) *core.Attacher {
	kc := fake.NewClientset()
	var once sync.Once
	kc.PrependReactor("get", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		once.Do(func() { close(entered) })
		<-release
		return false, nil, nil
	})
	a, err := core.NewAttacher(core.Config{Cluster: name, Client: kc, Reader: core.LiveReader{Client: kc}, Logger: testfix.Quiet()})
	require.NoError(t, err)
	return a
}

// With several clusters, a member that hangs holds at most its share of the in-flight
// slots: with 4 slots and 2 per cluster, 4 events for the hung cluster get 2 slots and 2
// busy answers, and an event for a healthy cluster still gets a slot. Without the bound
// the hung cluster's events took all 4 and the healthy one was answered busy.
func TestHungClusterLeavesTheOthersHalfTheSlots(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	kc := fake.NewClientset()
	healthy, err := core.NewAttacher(core.Config{Cluster: "healthy", Client: kc, Reader: core.LiveReader{Client: kc}, Logger: testfix.Quiet()})
	require.NoError(t, err)
	d, err := dispatch.New(dispatch.Config{Clusters: clusterMap{"hung": hungAttacher(t, "hung", release, entered), "healthy": healthy},
		MaxInFlight: 4, MaxInFlightPerCluster: 2, Logger: testfix.Quiet()})
	require.NoError(t, err)
	ctx := context.Background()
	answers := make(chan dispatch.Class, 4)
	var sent sync.WaitGroup
	for range 4 {
		sent.Add(1)
		go func() {
			defer sent.Done()
			answers <- d.Dispatch(ctx, dispatch.Request{Path: dispatch.PathHTTP, Event: core.Event{Cluster: "hung", Namespace: "shop", Name: "web-1"}}).Class
		}()
	}
	select { // the hung cluster's events hold their slots
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the hung cluster's reads did not arrive")
	}
	for range 2 {
		select {
		case c := <-answers:
			assert.Equal(t, dispatch.ClassBusy, c, "beyond the hung cluster's share")
		case <-time.After(10 * time.Second):
			t.Fatal("no busy answer: the hung cluster's events hold every slot")
		}
	}
	a := d.Dispatch(ctx, dispatch.Request{Path: dispatch.PathHTTP, Event: core.Event{Cluster: "healthy", Namespace: "shop", Name: "web-1"}})
	assert.NotEqual(t, dispatch.ClassBusy, a.Class, "the healthy cluster gets a slot: %v", a.Err)
	close(release)
	sent.Wait()
}

// countingClusters counts the lookups: an event is looked up right before it takes its
// slots.
type countingClusters struct {
	clusterMap
	looked atomic.Int32
}

func (c *countingClusters) Attacher(name string) (*core.Attacher, error) {
	c.looked.Add(1)
	return c.clusterMap.Attacher(name)
}

// The replays of the watchers (Request.Replay) hold at most a quarter of the in-flight
// slots together, so a pushed event is admitted while they wait: with 8 slots, 8
// replayed events of a hung cluster take 2, and an HTTP event of another cluster gets
// one. Without the share the replays took all 8 and every HTTP event was answered busy
// until they were done (bench/README.md, "live events during the start-up replay").
func TestReplaysLeavePushedEventsThreeQuartersOfTheSlots(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	kc := fake.NewClientset()
	healthy, err := core.NewAttacher(core.Config{Cluster: "healthy", Client: kc, Reader: core.LiveReader{Client: kc}, Logger: testfix.Quiet()})
	require.NoError(t, err)
	clusters := &countingClusters{clusterMap: clusterMap{"hung": hungAttacher(t, "hung", release, entered), "healthy": healthy}}
	d, err := dispatch.New(dispatch.Config{Clusters: clusters, MaxInFlight: 8, Logger: testfix.Quiet()})
	require.NoError(t, err)
	ctx := context.Background()
	var sent sync.WaitGroup
	for range 8 {
		sent.Add(1)
		go func() {
			defer sent.Done()
			d.Dispatch(ctx, dispatch.Request{Path: dispatch.PathWatcher, Replay: true, Event: core.Event{Cluster: "hung", Namespace: "shop", Name: "web-1"}})
		}()
	}
	select { // the first replayed event holds its slots
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the hung cluster's reads did not arrive")
	}
	for deadline := time.Now().Add(10 * time.Second); clusters.looked.Load() < 8; time.Sleep(time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the replayed events were not all dispatched")
	}
	// Each is now at its slots: without the share they take them without waiting.
	time.Sleep(100 * time.Millisecond)
	a := d.Dispatch(ctx, dispatch.Request{Path: dispatch.PathHTTP, Event: core.Event{Cluster: "healthy", Namespace: "shop", Name: "web-1"}})
	assert.NotEqual(t, dispatch.ClassBusy, a.Class, "an HTTP event gets a slot while replays wait: %v", a.Err)
	close(release)
	sent.Wait()
}
