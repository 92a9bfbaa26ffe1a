package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// DefaultParallel bounds how many clusters a fan-out works on at once.
const DefaultParallel = 4

// Parallel calls fn for every item with at most limit calls at once (limit < 1 means
// DefaultParallel) and waits for all of them. It returns the errors of the failed
// calls, each wrapped with the item's name, joined (nil when all succeeded). One slow
// or failing item never stops the others; ctx is passed to every call.
func Parallel[T any](ctx context.Context, items []T, limit int, name func(T) string, fn func(context.Context, T) error) error {
	if limit < 1 {
		limit = DefaultParallel
	}
	sem := make(chan struct{}, limit)
	errs := make([]error, len(items))
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = fmt.Errorf("cluster %s: %w", name(it), context.Cause(ctx))
				return
			}
			defer func() { <-sem }()
			if err := fn(ctx, it); err != nil {
				errs[i] = fmt.Errorf("cluster %s: %w", name(it), err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// SpecName returns s.Name (for Parallel over Specs).
func SpecName(s Spec) string { return s.Name }

// ClusterName returns c.Name() (for Parallel over Clusters).
func ClusterName(c *Cluster) string { return c.Name() }

// Select returns the specs named by names, in that order (all when names is empty). An
// unknown name is a *core.FieldError for "cluster" listing the known ones.
func Select(specs []Spec, names []string) ([]Spec, error) {
	if len(names) == 0 {
		return specs, nil
	}
	by := map[string]Spec{}
	for _, s := range specs {
		by[s.Name] = s
	}
	out := make([]Spec, 0, len(names))
	seen := map[string]bool{}
	for _, n := range names {
		s, ok := by[n]
		if !ok {
			return nil, core.Invalidf("cluster", "unknown cluster %q (known: %s)", core.Clip(n), joinNames(specs))
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, s)
		}
	}
	return out, nil
}

func joinNames(specs []Spec) string {
	s := ""
	for i, sp := range specs {
		if i > 0 {
			s += ", "
		}
		s += sp.Name
	}
	return s
}

// nsReader serves a cluster whose access is limited to some namespaces (Argo CD's
// "namespaces"): one namespaced cache each, live reads elsewhere.
type nsReader struct {
	byNS map[string]core.Reader
	live core.Reader
}

var (
	_ core.Reader            = nsReader{}
	_ core.ReplicaSetCache   = nsReader{}
	_ core.ReplicaSetAwaiter = nsReader{}
)

func (r nsReader) pick(ns string) core.Reader {
	if c, ok := r.byNS[ns]; ok {
		return c
	}
	return r.live
}

// ReplicaSet implements core.Reader.
func (r nsReader) ReplicaSet(ctx context.Context, ns, name string) (*appsv1.ReplicaSet, error) {
	return r.pick(ns).ReplicaSet(ctx, ns, name)
}

// CachedReplicaSet implements core.ReplicaSetCache: the namespace's cache, else a miss.
func (r nsReader) CachedReplicaSet(ns, name string) (*appsv1.ReplicaSet, bool) {
	if c, ok := r.byNS[ns].(core.ReplicaSetCache); ok {
		return c.CachedReplicaSet(ns, name)
	}
	return nil, false
}

// AwaitReplicaSet implements core.ReplicaSetAwaiter: the namespace's cache waits, else
// nothing can arrive (ok false at once).
func (r nsReader) AwaitReplicaSet(ctx context.Context, ns, name string, uid types.UID) (*appsv1.ReplicaSet, bool) {
	if c, ok := r.byNS[ns].(core.ReplicaSetAwaiter); ok {
		return c.AwaitReplicaSet(ctx, ns, name, uid)
	}
	return nil, false
}

// Deployment implements core.Reader.
func (r nsReader) Deployment(ctx context.Context, ns, name string) (*appsv1.Deployment, error) {
	return r.pick(ns).Deployment(ctx, ns, name)
}

// Rollout implements core.Reader.
func (r nsReader) Rollout(ctx context.Context, ns, name string) (*unstructured.Unstructured, error) {
	return r.pick(ns).Rollout(ctx, ns, name)
}

// Users implements core.Reader.
func (r nsReader) Users(ctx context.Context, kind core.Kind, ns, name string) (*core.Users, error) {
	return r.pick(ns).Users(ctx, kind, ns, name)
}

// ObjectMeta implements core.Reader.
func (r nsReader) ObjectMeta(ctx context.Context, kind core.Kind, ns, name string) (*metav1.PartialObjectMetadata, error) {
	return r.pick(ns).ObjectMeta(ctx, kind, ns, name)
}
