package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// ErrNotReady means something the attach waits for is not there yet: the workload's
// current ReplicaSet (its controller has not caught up), or a listed ConfigMap or Secret.
// WaitForCurrentReplicaSet retries on it; the wrapping error names what is missing.
var ErrNotReady = errors.New("not ready")

// CurrentReplicaSet returns the ReplicaSet that runs a workload's current pod template.
//
//   - Argo Rollout: once status.observedGeneration equals metadata.generation (the
//     Rollout controller has seen the latest spec), the ReplicaSet controlled by the
//     Rollout whose rollouts-pod-template-hash label equals status.currentPodHash.
//   - Deployment: once status.observedGeneration >= metadata.generation, the
//     ReplicaSet controlled by the Deployment whose deployment.kubernetes.io/revision
//     annotation equals the Deployment's (k8s.io/kubernetes deployment controller).
//   - ReplicaSet: the named ReplicaSet.
//
// kind is "Rollout", "Deployment" or "ReplicaSet". Errors: a wrapped ErrNotReady while
// the controller has not caught up, apierrors NotFound for a missing workload.
func CurrentReplicaSet(ctx context.Context, kc kubernetes.Interface, dc dynamic.Interface, kind, namespace, name string) (*appsv1.ReplicaSet, error) {
	switch kind {
	case "ReplicaSet":
		return kc.AppsV1().ReplicaSets(namespace).Get(ctx, name, metav1.GetOptions{})
	case RolloutKind:
		ro, err := dc.Resource(RolloutGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		observed, _, _ := unstructured.NestedString(ro.Object, "status", "observedGeneration")
		if observed != strconv.FormatInt(ro.GetGeneration(), 10) {
			return nil, fmt.Errorf("%w: Rollout %s/%s generation %d not yet observed by the Rollout controller (status.observedGeneration %q)", ErrNotReady, namespace, name, ro.GetGeneration(), observed)
		}
		hash, _, _ := unstructured.NestedString(ro.Object, "status", "currentPodHash")
		if hash == "" {
			return nil, fmt.Errorf("%w: Rollout %s/%s has no status.currentPodHash yet", ErrNotReady, namespace, name)
		}
		return ownedReplicaSet(ctx, kc, namespace, ro.GetUID(), labels.Set{RolloutHashLabel: hash}.AsSelector().String(),
			func(*appsv1.ReplicaSet) bool { return true }, "Rollout "+namespace+"/"+name+" pod hash "+hash)
	case "Deployment":
		d, err := kc.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if d.Status.ObservedGeneration < d.Generation {
			return nil, fmt.Errorf("%w: Deployment %s/%s generation %d not yet observed (status.observedGeneration %d)", ErrNotReady, namespace, name, d.Generation, d.Status.ObservedGeneration)
		}
		rev := d.Annotations[DeploymentRevisionAnnotation]
		if rev == "" {
			return nil, fmt.Errorf("%w: Deployment %s/%s has no %s annotation yet", ErrNotReady, namespace, name, DeploymentRevisionAnnotation)
		}
		return ownedReplicaSet(ctx, kc, namespace, d.UID, "",
			func(rs *appsv1.ReplicaSet) bool { return rs.Annotations[DeploymentRevisionAnnotation] == rev },
			"Deployment "+namespace+"/"+name+" revision "+rev)
	}
	return nil, Invalidf("kind", "workload kind %q is not Rollout, Deployment or ReplicaSet", kind)
}

func ownedReplicaSet(ctx context.Context, kc kubernetes.Interface, ns string, owner types.UID, selector string, match func(*appsv1.ReplicaSet) bool, what string) (*appsv1.ReplicaSet, error) {
	list, err := kc.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		rs := &list.Items[i]
		if c := metav1.GetControllerOf(rs); c != nil && c.UID == owner && rs.DeletionTimestamp == nil && match(rs) {
			return rs, nil
		}
	}
	return nil, fmt.Errorf("%w: no ReplicaSet yet for %s", ErrNotReady, what)
}

// WaitForCurrentReplicaSet polls CurrentReplicaSet every interval until it succeeds,
// fails for another reason than ErrNotReady or a transient API error, or ctx ends. A
// missing workload is waited for too (a Sync hook may start before its Rollout exists).
// On timeout the error names what was still missing.
func WaitForCurrentReplicaSet(ctx context.Context, kc kubernetes.Interface, dc dynamic.Interface, kind, namespace, name string, interval time.Duration) (*appsv1.ReplicaSet, error) {
	var rs *appsv1.ReplicaSet
	var last error
	err := wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		var err error
		rs, err = CurrentReplicaSet(ctx, kc, dc, kind, namespace, name)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, ErrNotReady), apierrors.IsNotFound(err), !IsPermanent(err) && !errors.Is(err, ErrInvalid):
			if last != nil && cutShort(ctx, err) {
				return false, nil // the deadline cut this try short: keep the last real reason
			}
			if apierrors.IsNotFound(err) {
				err = fmt.Errorf("%w: %s %s/%s not found", ErrNotReady, kind, namespace, name)
			}
			last = err
			return false, nil
		}
		return false, err
	})
	if err != nil {
		if last != nil && ctx.Err() != nil {
			return nil, fmt.Errorf("timed out waiting: %w", last)
		}
		return nil, err
	}
	return rs, nil
}

// cutShort reports whether err only says that ctx's deadline stopped the request (the
// context ended, or client-go's rate limiter declined to wait past the deadline).
func cutShort(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		strings.Contains(err.Error(), "would exceed context deadline")
}
