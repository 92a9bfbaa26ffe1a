package gc_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/cache"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// countedClients are clients of the control plane whose requests counter counts.
func (e *env) countedClients(t *testing.T, counter *kube.RequestCounter) *kube.Clients {
	t.Helper()
	cl, err := kube.NewClients(counter.Wrap(e.cp.RESTConfig()))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// startCache runs a synced informer cache of the test's namespace on clients.
func (e *env) startCache(t *testing.T, clients *kube.Clients) *cache.Cache {
	t.Helper()
	c := e.startCacheSyncedWithoutUsers(t, clients)
	// The user informers start with the first sweep (docs/design.md, "Per-cluster cost"):
	// started here (Workloads waits for them), so the requests counted are the sweep's own.
	wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
	defer wcancel()
	_, _ = c.Workloads(wctx, e.ns)
	return c
}

// startCacheSyncedWithoutUsers runs an informer cache of the test's namespace on
// clients, synced but for its user informers (not started yet).
func (e *env) startCacheSyncedWithoutUsers(t *testing.T, clients *kube.Clients) *cache.Cache {
	t.Helper()
	c, err := cache.New(clients, cache.Options{Namespace: e.ns, Logger: testfix.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	if err := c.WaitForSync(wctx); err != nil {
		t.Fatal(err)
	}
	return c
}

func (e *env) cachedSweeper(t *testing.T, clients *kube.Clients, store gc.Store) *gc.Sweeper {
	t.Helper()
	live := gc.LiveSource{Client: clients.Kube, Dynamic: clients.Dynamic, Metadata: clients.Metadata}
	sw, err := gc.NewSweeper(gc.Config{Client: clients.Kube, Metadata: clients.Metadata, Source: gc.CachedSource{Store: store, Live: live},
		Options: gc.Options{MinAge: 0, Keep: 0}, Namespaces: []string{e.ns}, Logger: testfix.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return sw
}

// A sweep planned from the caches sends no request at all when it has nothing to delete
// (steady state). One with deletes confirms them with a live plan of that namespace (its
// LISTs: a cache may lag by more than the watch delay, and a user it has not seen must
// keep its revision), then one live GET of each candidate right before its delete.
func TestCachedSweepSendsNoListInSteadyState(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.configMap(t, "orphan-1a2b3c", "orphan", nil)
	e.configMap(t, "orphan-4d5e6f", "orphan", nil)
	e.configMap(t, "used-1a2b3c", "used", nil)
	e.replicaSet(t, "web-5d4c3b2a1", "used-1a2b3c")
	counter := &kube.RequestCounter{}
	clients := e.countedClients(t, counter)
	sw := e.cachedSweeper(t, clients, e.startCache(t, clients))

	for _, tc := range []struct {
		name                          string
		deleted, lists, gets, deletes int
	}{
		{name: "sweep with two orphans: confirmed by a live plan", deleted: 2, lists: 10, gets: 12, deletes: 2},
		{name: "steady state: nothing to do, no request", deleted: 0, lists: 0, gets: 0, deletes: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.deleted == 0 {
				waitGoneFromCache(t, sw, e.ns)
			}
			counter.Reset()
			rep, err := sw.SweepNamespace(ctx, e.ns)
			if err != nil {
				t.Fatal(err)
			}
			if got := rep.Count(gc.OutcomeDeleted); got != tc.deleted {
				t.Fatalf("deleted %d, want %d: %+v", got, tc.deleted, rep.Results)
			}
			if got := counter.Lists(); got != tc.lists {
				t.Errorf("%d LISTs, want %d", got, tc.lists)
			}
			if got := counter.Count("GET"); got != tc.gets {
				t.Errorf("%d GETs, want %d (one per candidate)", got, tc.gets)
			}
			if got := counter.Count("DELETE"); got != tc.deletes {
				t.Errorf("%d DELETEs, want %d", got, tc.deletes)
			}
			if !e.exists(t, "used-1a2b3c") {
				t.Fatal("the referenced revision was deleted")
			}
		})
	}
}

// waitGoneFromCache waits (bounded) until a dry-run plan from the caches deletes nothing:
// the deletes of the previous sweep have reached the informers.
func waitGoneFromCache(t *testing.T, sw *gc.Sweeper, ns string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, _, err := sw.Plan(context.Background(), ns)
		if err == nil && p.Count(gc.Delete) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the caches still plan deletes: %v %+v", err, p)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// staleStore is a cache that lags: it answers with what it was given, whatever the
// cluster holds now.
type staleStore struct {
	revs []*metav1.PartialObjectMetadata
	objs []any
}

func (s staleStore) HasSynced() bool    { return true }
func (s staleStore) Covers(string) bool { return true }
func (s staleStore) Workloads(context.Context, string) ([]any, bool) {
	return s.objs, true
}
func (s staleStore) Revisions(kind core.Kind, _ string) ([]*metav1.PartialObjectMetadata, bool) {
	if kind != core.KindConfigMap {
		return nil, true
	}
	return s.revs, true
}
func (s staleStore) RevisionNamespaces(core.Kind) ([]string, bool) { return nil, true }

// A plan from a lagging cache never deletes what the cluster still needs: the live read
// right before the delete finds the revision changed (attached meanwhile), or its owner
// live (a ReplicaSet the cache has not seen yet), and no DELETE is sent.
func TestCachedSweepConfirmsLiveBeforeDelete(t *testing.T) {
	for _, tc := range []struct {
		name string
		want gc.Outcome
		// stale returns the revision's metadata as the lagging cache holds it, after
		// changing the cluster.
		stale func(t *testing.T, e *env) *metav1.PartialObjectMetadata
	}{
		{name: "attached after the cache saw it", want: gc.OutcomeKept,
			stale: func(t *testing.T, e *env) *metav1.PartialObjectMetadata {
				cm := e.configMap(t, "cfg-1a2b3c", "cfg", nil)
				old := &metav1.PartialObjectMetadata{ObjectMeta: cm.ObjectMeta}
				rs := e.replicaSet(t, "web-5d4c3b2a1", cm.Name)
				res, err := e.attacher(t).Attach(context.Background(), core.Event{Namespace: e.ns, Name: rs.Name, UID: rs.UID, Options: core.DefaultOptions()})
				if err != nil || res.Writes() != 1 {
					t.Fatalf("attach: %v %+v", err, res)
				}
				return old
			}},
		{name: "owned by a ReplicaSet the cache has not seen", want: gc.OutcomeKept,
			stale: func(t *testing.T, e *env) *metav1.PartialObjectMetadata {
				rs := e.replicaSet(t, "api-5d4c3b2a1", "other")
				cm := e.configMap(t, "api-1a2b3c", "api", nil)
				cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID}}
				cm, err := e.clients.Kube.CoreV1().ConfigMaps(e.ns).Update(context.Background(), cm, metav1.UpdateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return &metav1.PartialObjectMetadata{ObjectMeta: cm.ObjectMeta}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			m := tc.stale(t, e)
			counter := &kube.RequestCounter{}
			clients := e.countedClients(t, counter)
			sw := e.cachedSweeper(t, clients, staleStore{revs: []*metav1.PartialObjectMetadata{m}, objs: []any{}})
			rep, err := sw.SweepNamespace(context.Background(), e.ns)
			if err != nil {
				t.Fatal(err)
			}
			if got := rep.Results[0].Outcome; got != tc.want {
				t.Fatalf("outcome %q, want %q (%s)", got, tc.want, rep.Results[0].Error)
			}
			if got := counter.Count("DELETE"); got != 0 {
				t.Fatalf("%d DELETEs sent", got)
			}
			if !e.exists(t, m.Name) {
				t.Fatal("the revision was deleted")
			}
		})
	}
}

var _ gc.Store = (*cache.Cache)(nil)
