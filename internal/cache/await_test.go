package cache

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// Unit tests of AwaitReplicaSet with fake clients: the wait ends the moment the
// ReplicaSet informer delivers the ReplicaSet (with the UID asked for), at the cache's
// bound, or when the caller's context ends; it does not start where nothing can arrive.
func TestAwaitReplicaSet(t *testing.T) {
	const ns, long = "shop", 30 * time.Second // long: never reached when the test passes
	newRS := func(uid types.UID) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1", UID: uid}}
	}
	cases := []struct {
		name    string
		bound   time.Duration
		cached  *appsv1.ReplicaSet // in the cache before the wait
		uid     types.UID          // asked for
		during  func(t *testing.T, kc *fake.Clientset, cancel context.CancelFunc)
		want    types.UID // "": ok false
		outcome string
	}{
		{"arrives during the wait: hit", long, nil, "rs-2", func(t *testing.T, kc *fake.Clientset, _ context.CancelFunc) {
			create(t, kc, newRS("rs-2"))
		}, "rs-2", "hit"},
		{"any UID: the first arrival is a hit", long, nil, "", func(t *testing.T, kc *fake.Clientset, _ context.CancelFunc) {
			create(t, kc, newRS("rs-2"))
		}, "rs-2", "hit"},
		{"never arrives: false after the bound", 50 * time.Millisecond, nil, "rs-2", nil, "", "timeout"},
		{"context cancelled: false", long, nil, "rs-2", func(_ *testing.T, _ *fake.Clientset, cancel context.CancelFunc) {
			cancel()
		}, "", "cancelled"},
		{"an older namesake is updated, then the new UID arrives", long, newRS("rs-1"), "rs-2", func(t *testing.T, kc *fake.Clientset, _ context.CancelFunc) {
			old := newRS("rs-1")
			old.Labels = map[string]string{"touched": "true"}
			_, err := kc.AppsV1().ReplicaSets(ns).Update(context.Background(), old, metav1.UpdateOptions{})
			assert.NoError(t, err)
			assert.NoError(t, kc.AppsV1().ReplicaSets(ns).Delete(context.Background(), "web-1", metav1.DeleteOptions{}))
			create(t, kc, newRS("rs-2"))
		}, "rs-2", "hit"},
		{"already cached with the UID: hit at once", long, newRS("rs-2"), "rs-2", nil, "rs-2", "hit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.cached != nil {
				objs = append(objs, tc.cached)
			}
			c, kc := runFakeCache(t, Options{ReplicaSetWait: tc.bound}, objs...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.during != nil {
				go func() {
					waitingFor(t, c, ns+"/web-1")
					tc.during(t, kc, cancel)
				}()
			}
			rs, ok := c.AwaitReplicaSet(ctx, ns, "web-1", tc.uid)
			assert.Equal(t, tc.want != "", ok)
			if ok {
				assert.Equal(t, tc.want, rs.UID)
			}
			for _, o := range []string{"hit", "timeout", "cancelled"} {
				want := int64(0)
				if o == tc.outcome {
					want = 1
				}
				assert.Equal(t, want, c.Waits(o), "waits %s", o)
			}
		})
	}
}

// No wait where the informer cannot deliver: a namespace outside the cache's, an
// informer that has not synced, waiting turned off.
func TestAwaitReplicaSetDoesNotWaitWhereNothingCanArrive(t *testing.T) {
	const long = 30 * time.Second
	cases := []struct {
		name string
		opts Options
		run  bool
		ns   string
	}{
		{"namespace outside the cache's", Options{Namespace: "shop", ReplicaSetWait: long}, true, "other"},
		{"informer not synced", Options{ReplicaSetWait: long}, false, "shop"},
		{"waiting off", Options{ReplicaSetWait: -1}, true, "shop"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c *Cache
			if tc.run {
				c, _ = runFakeCache(t, tc.opts)
			} else {
				c, _ = newFakeCache(t, tc.opts)
			}
			_, ok := c.AwaitReplicaSet(context.Background(), tc.ns, "web-1", "rs-2")
			assert.False(t, ok)
			for _, o := range []string{"hit", "timeout", "cancelled"} {
				assert.Zero(t, c.Waits(o), "no wait counted: %s", o)
			}
		})
	}
}

func newFakeCache(t *testing.T, opts Options, objs ...runtime.Object) (*Cache, *fake.Clientset) {
	t.Helper()
	kc := fake.NewClientset(objs...)
	scheme := metadatafake.NewTestScheme()
	require.NoError(t, metav1.AddMetaToScheme(scheme))
	dc := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{core.RolloutGVR: "RolloutList"})
	opts.Logger = testfix.Quiet()
	c, err := New(&kube.Clients{Kube: kc, Dynamic: dc, Metadata: metadatafake.NewSimpleMetadataClient(scheme)}, opts)
	require.NoError(t, err)
	return c, kc
}

// runFakeCache runs a cache on fake clients, synced and with its ReplicaSet watch
// established (a fake watch misses what is created before it starts: a sentinel
// ReplicaSet proves it has).
func runFakeCache(t *testing.T, opts Options, objs ...runtime.Object) (*Cache, *fake.Clientset) {
	t.Helper()
	c, kc := newFakeCache(t, opts, objs...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	require.NoError(t, c.WaitForSync(wctx))
	ns := "sentinel"
	if opts.Namespace != "" {
		ns = opts.Namespace
	}
	sentinel := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sentinel", UID: "sentinel"}}
	require.Eventually(t, func() bool {
		_, _ = kc.AppsV1().ReplicaSets(ns).Create(ctx, sentinel, metav1.CreateOptions{})
		_, ok := c.CachedReplicaSet(ns, "sentinel")
		if !ok {
			_ = kc.AppsV1().ReplicaSets(ns).Delete(ctx, "sentinel", metav1.DeleteOptions{})
		}
		return ok
	}, 10*time.Second, 10*time.Millisecond, "the ReplicaSet watch")
	c.misses = counters{}
	return c, kc
}

// waitingFor returns once an AwaitReplicaSet call waits for key (asserts: it runs beside
// the wait, in a goroutine of its own).
func waitingFor(t *testing.T, c *Cache, key string) {
	assert.Eventually(t, func() bool {
		c.arrivals.mu.Lock()
		defer c.arrivals.mu.Unlock()
		return c.arrivals.keys[key] != nil
	}, 10*time.Second, time.Millisecond, "a wait for %s", key)
}

func create(t *testing.T, kc *fake.Clientset, rs *appsv1.ReplicaSet) {
	_, err := kc.AppsV1().ReplicaSets(rs.Namespace).Create(context.Background(), rs, metav1.CreateOptions{})
	assert.NoError(t, err)
}
