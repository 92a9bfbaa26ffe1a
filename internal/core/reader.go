package core

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
)

// Group-version-resources the core reads.
var (
	RolloutGVR   = schema.GroupVersionResource{Group: RolloutGroup, Version: RolloutVersion, Resource: RolloutResource}
	ConfigMapGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	SecretGVR    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// GVR returns the resource of a config kind.
func (k Kind) GVR() schema.GroupVersionResource {
	if k == KindSecret {
		return SecretGVR
	}
	return ConfigMapGVR
}

// Reader is how the core reads the cluster. Implementations return the apiserver's
// NotFound error (apierrors.IsNotFound) for a missing object. Returned objects may be
// shared with an informer cache: callers must not mutate them.
type Reader interface {
	ReplicaSet(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error)
	Deployment(ctx context.Context, namespace, name string) (*appsv1.Deployment, error)
	// Rollout returns an Argo Rollout (argoproj.io/v1alpha1) as unstructured data, so
	// that no Argo Rollouts Go types are needed.
	Rollout(ctx context.Context, namespace, name string) (*unstructured.Unstructured, error)
	// ObjectMeta returns only the metadata of a ConfigMap or Secret: data never enters
	// memory through the core.
	ObjectMeta(ctx context.Context, kind Kind, namespace, name string) (*metav1.PartialObjectMetadata, error)
	// Users returns the objects of namespace that use the config object kind/name (see
	// Users). A failed read is an error: a partial answer could leave a user unprotected.
	Users(ctx context.Context, kind Kind, namespace, name string) (*Users, error)
}

// ReplicaSetCache is an optional Reader extension for informer-backed readers:
// CachedReplicaSet answers from the cache alone (ok false on a miss). On a miss (or a
// cached namesake of another UID than the event's) the Attacher waits for the cache
// (ReplicaSetAwaiter) or reads the ReplicaSet live itself; either way it confirms the
// ReplicaSet live right before the write (docs/design.md, "The live confirm").
type ReplicaSetCache interface {
	CachedReplicaSet(namespace, name string) (*appsv1.ReplicaSet, bool)
}

// ReplicaSetAwaiter is an optional Reader extension for informer-backed readers:
// AwaitReplicaSet returns the cached ReplicaSet namespace/name (with UID uid, unless uid
// is empty) once the cache has it, waiting for the cache's own watch to deliver it for at
// most a bound the reader owns, and no longer than ctx. ok false: it did not arrive, or
// the reader cannot wait for it (say, a namespace it does not watch), and said so at once.
// An event that outruns the cache then costs one GET (the confirm), not two.
type ReplicaSetAwaiter interface {
	AwaitReplicaSet(ctx context.Context, namespace, name string, uid types.UID) (*appsv1.ReplicaSet, bool)
}

// LiveReader reads every object straight from the apiserver (one GET each). It is what
// the one-shot CLI uses; long-running paths use informer-backed readers.
type LiveReader struct {
	Client   kubernetes.Interface
	Dynamic  dynamic.Interface
	Metadata metadata.Interface
}

// ReplicaSet implements Reader.
func (r LiveReader) ReplicaSet(ctx context.Context, ns, name string) (*appsv1.ReplicaSet, error) {
	return r.Client.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
}

// Deployment implements Reader.
func (r LiveReader) Deployment(ctx context.Context, ns, name string) (*appsv1.Deployment, error) {
	return r.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
}

// Rollout implements Reader.
func (r LiveReader) Rollout(ctx context.Context, ns, name string) (*unstructured.Unstructured, error) {
	return r.Dynamic.Resource(RolloutGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
}

// ObjectMeta implements Reader.
func (r LiveReader) ObjectMeta(ctx context.Context, kind Kind, ns, name string) (*metav1.PartialObjectMetadata, error) {
	return r.Metadata.Resource(kind.GVR()).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
}

// Users implements Reader with one live LIST per kind in the namespace (Pods first, then
// ReplicaSets, ControllerRevisions, StatefulSets, DaemonSets, Jobs, CronJobs, Deployments,
// Rollouts; a missing Rollout CRD means no Rollouts), filtered with Uses.
func (r LiveReader) Users(ctx context.Context, kind Kind, ns, name string) (*Users, error) {
	apps, batch, o := r.Client.AppsV1(), r.Client.BatchV1(), metav1.ListOptions{}
	lists := []struct {
		what string
		list func() (runtime.Object, error)
	}{
		// Pods first: a Pod's controller existed before the Pod, so the later lists hold
		// it (unless it went since) and a Pod its controller covers is never an owner.
		{"Pods", func() (runtime.Object, error) { return r.Client.CoreV1().Pods(ns).List(ctx, o) }},
		{"ReplicaSets", func() (runtime.Object, error) { return apps.ReplicaSets(ns).List(ctx, o) }},
		{"ControllerRevisions", func() (runtime.Object, error) { return apps.ControllerRevisions(ns).List(ctx, o) }},
		{"StatefulSets", func() (runtime.Object, error) { return apps.StatefulSets(ns).List(ctx, o) }},
		{"DaemonSets", func() (runtime.Object, error) { return apps.DaemonSets(ns).List(ctx, o) }},
		{"Jobs", func() (runtime.Object, error) { return batch.Jobs(ns).List(ctx, o) }},
		{"CronJobs", func() (runtime.Object, error) { return batch.CronJobs(ns).List(ctx, o) }},
		{"Deployments", func() (runtime.Object, error) { return apps.Deployments(ns).List(ctx, o) }},
		{"Rollouts", func() (runtime.Object, error) {
			l, err := r.Dynamic.Resource(RolloutGVR).Namespace(ns).List(ctx, o)
			if apierrors.IsNotFound(err) {
				return &unstructured.UnstructuredList{}, nil // no Argo Rollouts CRD: no Rollouts
			}
			return l, err
		}},
	}
	all := &Users{}
	for _, l := range lists {
		list, err := l.list()
		if err != nil {
			return nil, apiFailure("listing", l.what+" in "+ns, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, fmt.Errorf("listing %s in %s: %w", l.what, ns, err)
		}
		for _, it := range items {
			all.Add(it)
		}
	}
	return all.of(kind, name), nil
}
