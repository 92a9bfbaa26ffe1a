package core

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
