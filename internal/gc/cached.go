package gc

import (
	"context"
	"errors"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// Store is what a CachedSource reads: synced informer caches (package cache's Cache
// implements it). Objects it returns are fresh copies (package cache decodes its stored
// records); they are never mutated here all the same.
type Store interface {
	// HasSynced reports whether every informer has completed its initial list.
	HasSynced() bool
	// Covers reports whether the caches hold every object of namespace.
	Covers(namespace string) bool
	// Workloads returns every cached object with a pod template or pod spec in
	// namespace (ReplicaSets, Deployments, StatefulSets, DaemonSets, Jobs, CronJobs, Pods,
	// and Rollouts as unstructured), and whether Rollouts are known completely: their
	// informer has synced, or the Argo Rollouts API was just confirmed absent.
	Workloads(ctx context.Context, namespace string) (objs []any, rollouts bool)
	// Revisions returns the cached metadata of the ConfigMaps or Secrets of namespace;
	// false when that kind is not cached.
	Revisions(kind core.Kind, namespace string) ([]*metav1.PartialObjectMetadata, bool)
	// RevisionNamespaces returns the namespaces holding a cached object of kind with the
	// opt-in label; false when that kind is not cached.
	RevisionNamespaces(kind core.Kind) ([]string, bool)
}

// ErrNotSynced is returned (wrapping core.ErrUnavailable) by a CachedSource whose Store
// cannot answer completely yet: a sweep is never planned on a partial cache.
var ErrNotSynced = errors.New("informer caches not complete yet")

// CachedSource plans from informer caches: a sweep in steady state sends no LIST (docs/
// design.md, "The sweep from the caches"). A namespace the caches do not cover, or a
// kind they do not hold, is read through Live instead; until the caches have synced the
// snapshot is refused with ErrNotSynced. What a cached plan would delete is confirmed
// live by the Executor, candidate by candidate, right before its delete.
type CachedSource struct {
	Store Store
	// Live reads what the caches do not hold (its IncludeSecrets says which kinds count).
	Live LiveSource
}

// Namespaces implements Source from the caches' revision metadata.
func (c CachedSource) Namespaces(ctx context.Context) ([]string, error) {
	if !c.Store.HasSynced() {
		return nil, fmt.Errorf("%w: %w", core.ErrUnavailable, ErrNotSynced)
	}
	seen := map[string]bool{}
	for _, k := range c.Live.kinds() {
		nss, ok := c.Store.RevisionNamespaces(k)
		if !ok {
			return c.Live.Namespaces(ctx)
		}
		for _, ns := range nss {
			seen[ns] = true
		}
	}
	out := make([]string, 0, len(seen))
	for ns := range seen {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out, nil
}

// Snapshot implements Source: the same snapshot LiveSource builds, from the caches.
func (c CachedSource) Snapshot(ctx context.Context, ns string) (*Snapshot, error) {
	if !c.Store.Covers(ns) {
		return c.Live.Snapshot(ctx, ns)
	}
	if !c.Store.HasSynced() {
		return nil, fmt.Errorf("%w: %w", core.ErrUnavailable, ErrNotSynced)
	}
	s := &Snapshot{Namespace: ns, Listed: map[schema.GroupKind]bool{}, Live: map[types.UID]bool{}}
	for _, k := range c.Live.kinds() {
		metas, ok := c.Store.Revisions(k, ns)
		if !ok {
			return c.Live.Snapshot(ctx, ns)
		}
		for _, m := range metas {
			if m.Labels[core.LabelRevision] == "true" {
				s.Revisions = append(s.Revisions, RevisionFromMeta(k, &m.ObjectMeta))
			}
		}
	}
	if len(s.Revisions) == 0 {
		// Nothing to keep or delete: the workloads are not read, so that a cluster with no
		// revision does not start its user informers (docs/design.md, "Per-cluster cost").
		return s, nil
	}
	objs, rollouts := c.Store.Workloads(ctx, ns)
	if !rollouts {
		return nil, fmt.Errorf("%w: %w: the workload caches cannot answer completely (the user informers or Argo Rollouts are still listing)", core.ErrUnavailable, ErrNotSynced)
	}
	for _, gk := range WorkloadKinds {
		s.Listed[gk] = true
	}
	for _, o := range objs {
		w, ok, err := fromCached(o)
		if err != nil {
			return nil, err
		}
		if ok {
			s.Workloads = append(s.Workloads, w)
			s.Live[w.UID] = true
		}
	}
	sortSnapshot(s)
	return s, nil
}

// fromCached converts one cached object; false for a kind the sweep does not read.
func fromCached(o any) (Workload, bool, error) {
	switch v := o.(type) {
	case *appsv1.ReplicaSet:
		return FromReplicaSet(v), true, nil
	case *appsv1.Deployment:
		return FromDeployment(v), true, nil
	case *appsv1.StatefulSet:
		return FromStatefulSet(v), true, nil
	case *appsv1.DaemonSet:
		return FromDaemonSet(v), true, nil
	case *batchv1.Job:
		return FromJob(v), true, nil
	case *batchv1.CronJob:
		return FromCronJob(v), true, nil
	case *corev1.Pod:
		return FromPod(v), true, nil
	case *appsv1.ControllerRevision:
		return FromControllerRevision(v), true, nil
	case *unstructured.Unstructured:
		w, err := FromRollout(v)
		if err != nil {
			return Workload{}, false, fmt.Errorf("decoding Rollout %s/%s: %w", v.GetNamespace(), v.GetName(), err)
		}
		return w, true, nil
	}
	return Workload{}, false, nil
}

// sortSnapshot puts revisions and workloads in a fixed order (the caches' is a map's).
func sortSnapshot(s *Snapshot) {
	sort.Slice(s.Revisions, func(i, j int) bool {
		a, b := s.Revisions[i], s.Revisions[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Name < b.Name
	})
	sort.Slice(s.Workloads, func(i, j int) bool {
		a, b := s.Workloads[i], s.Workloads[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Name < b.Name
	})
}

// Stores is one Store over several (a cluster cached one namespace per Store): each
// namespace is answered by the first Store that covers it.
type Stores []Store

// HasSynced implements Store: every Store has synced.
func (s Stores) HasSynced() bool {
	for _, st := range s {
		if !st.HasSynced() {
			return false
		}
	}
	return true
}

func (s Stores) covering(ns string) Store {
	for _, st := range s {
		if st.Covers(ns) {
			return st
		}
	}
	return nil
}

// Covers implements Store.
func (s Stores) Covers(ns string) bool { return s.covering(ns) != nil }

// Workloads implements Store.
func (s Stores) Workloads(ctx context.Context, ns string) ([]any, bool) {
	if st := s.covering(ns); st != nil {
		return st.Workloads(ctx, ns)
	}
	return nil, false
}

// Revisions implements Store.
func (s Stores) Revisions(kind core.Kind, ns string) ([]*metav1.PartialObjectMetadata, bool) {
	if st := s.covering(ns); st != nil {
		return st.Revisions(kind, ns)
	}
	return nil, false
}

// RevisionNamespaces implements Store: the union (false if any Store lacks the kind).
func (s Stores) RevisionNamespaces(kind core.Kind) ([]string, bool) {
	var out []string
	for _, st := range s {
		nss, ok := st.RevisionNamespaces(kind)
		if !ok {
			return nil, false
		}
		out = append(out, nss...)
	}
	return out, true
}
